"""`redacted_body`: what the merged results echo of a request body that carries credentials; and
the simple format's content of an answer that holds several."""

from __future__ import annotations

from typing import Any

import orjson

from batchgate.services.results.result_formats import REDACTED, SimpleRenderer, redacted_body


def test_tool_and_workflow_authorizations_are_redacted_and_the_rest_kept() -> None:
    body: dict[str, Any] = {
        "model": "gpt-4o-mini",
        "messages": [{"role": "user", "content": "batchgate \u2028"}],
        "batchgate": {
            "tool_config": {"type": "http", "url": "https://tools.example/", "authorization": "Bearer t"},
            "workflow": {"url": "https://cb.example/", "authorization": "Bearer w", "context": {"k": 1}},
        },
    }
    echoed = orjson.loads(redacted_body(orjson.dumps(body)))
    assert echoed["batchgate"]["tool_config"]["authorization"] == REDACTED
    assert echoed["batchgate"]["workflow"]["authorization"] == REDACTED
    for section in ("tool_config", "workflow"):
        echoed["batchgate"][section]["authorization"] = body["batchgate"][section]["authorization"]
    assert echoed == body


def test_bodies_without_a_credential_come_back_as_they_are() -> None:
    """The hot path: most bodies are not parsed at all, and none is rewritten needlessly."""
    for body in (
        {"model": "m", "messages": []},
        {"model": "m", "messages": [{"role": "user", "content": "batchgate"}], "batchgate": None},
        {"model": "m", "batchgate": {"tool_config": {"url": "https://tools.example/"}}},
        {"model": "m", "batchgate": {"workflow": "not an object"}},
    ):
        stored = orjson.dumps(body)
        assert redacted_body(stored) is stored


def test_simple_content_is_every_answer_in_order_where_there_are_several() -> None:
    """Only the first embedding of a list input (and the first of `n` choices) was kept."""

    def content(endpoint: str, answer: dict[str, Any]) -> Any:
        return SimpleRenderer(endpoint).content(orjson.dumps(answer))

    vectors = [
        {"index": 1, "embedding": [0.2]},
        {"index": 0, "embedding": [0.1]},
        {"index": 2, "embedding": [0.3]},
    ]
    assert content("/v1/embeddings", {"data": vectors}) == [[0.1], [0.2], [0.3]]
    assert content("/v1/embeddings", {"data": vectors[1:2]}) == [0.1]  # one input: its vector, as before
    choices = [{"index": 1, "message": {"content": "b"}}, {"index": 0, "message": {"content": "a"}}]
    assert content("/v1/chat/completions", {"choices": choices}) == ["a", "b"]
    assert content("/v1/chat/completions", {"choices": choices[:1]}) == "b"
    texts = [{"index": 0, "text": "x"}, {"index": 1, "text": "y"}]
    assert content("/v1/completions", {"choices": texts}) == ["x", "y"]
    assert content("/v1/completions", {"choices": []}) is None  # nothing to show: null, as for any odd shape
