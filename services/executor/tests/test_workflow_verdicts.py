"""What a workflow callback may answer: the three verdicts, and every malformed answer named."""

from __future__ import annotations

from typing import Any

import pytest

from batchgate.services.executor.workflows.callback import CallbackFailure, Requested, read_verdict


def test_the_three_verdicts() -> None:
    going = read_verdict({"status": "continue", "requests": [{"id": "a", "body": {"messages": []}}]})
    assert going.requests == [Requested(id="a", body={"messages": []})]
    assert read_verdict({"status": "completed", "output": {"x": 1}}).output == {"x": 1}
    assert read_verdict({"status": "failed", "error": "no"}).error == "no"


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        ([], "the answer's 'status' is not one of"),
        ({"status": "done"}, "the answer's 'status' is not one of"),
        ({"status": "continue"}, "a 'continue' answer needs a non-empty 'requests' list"),
        ({"status": "continue", "requests": []}, "a 'continue' answer needs a non-empty 'requests' list"),
        ({"status": "continue", "requests": [{"body": {}}]}, "requests[0] has no string 'id'"),
        ({"status": "continue", "requests": [{"id": "a", "body": []}]}, "requests[0] has no object 'body'"),
        (
            {"status": "continue", "requests": [{"id": "a", "body": {}}, {"id": "a", "body": {}}]},
            "the ids of 'requests' are not unique",
        ),
    ],
)
def test_malformed_answers_are_callback_failures(answer: Any, why: str) -> None:
    with pytest.raises(CallbackFailure, match=None) as caught:
        read_verdict(answer)
    assert str(caught.value).startswith(why)
