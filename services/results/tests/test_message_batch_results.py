"""One Message Batch result line per item state, parsed by the anthropic SDK's own type."""

from __future__ import annotations

from typing import Any

import orjson
import pydantic
import pytest
from anthropic.types.messages import MessageBatchIndividualResponse

from batchgate.services.results.message_batch_results import result_line

MESSAGE = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-haiku-4-5",
    "content": [{"type": "text", "text": "Hi\u2028there"}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {"input_tokens": 3, "output_tokens": 2},
}
ANTHROPIC_ERROR = {"type": "error", "error": {"type": "overloaded_error", "message": "Busy"}}
OPENAI_ERROR = {
    "error": {"message": "bad stop", "type": "invalid_request_error", "param": "stop", "code": None}
}

# (idx, custom_id, state, status_code, response, request_id, error_code, error_message)
CASES: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = [
    (
        "succeeded",
        (0, "a", "succeeded", 200, orjson.dumps(MESSAGE), "req_1", None, None),
        {"type": "succeeded", "message": MESSAGE},
    ),
    (
        "upstream error in Anthropic's shape keeps its type",
        (1, "b", "failed", 529, orjson.dumps(ANTHROPIC_ERROR), "req_2", None, None),
        {"type": "errored", "error": {**ANTHROPIC_ERROR, "request_id": "req_2"}},
    ),
    (
        "an OpenAI-compatible upstream's error is typed by its status",
        (2, "c", "failed", 400, orjson.dumps(OPENAI_ERROR), "req_3", None, None),
        {
            "type": "errored",
            "error": {
                "type": "error",
                "error": {"type": "invalid_request_error", "message": "bad stop"},
                "request_id": "req_3",
            },
        },
    ),
    (
        "refused at create",
        (3, "d", "rejected", None, None, None, "missing_max_tokens", "'params.max_tokens' is required."),
        {
            "type": "errored",
            "error": {
                "type": "error",
                "error": {"type": "invalid_request_error", "message": "'params.max_tokens' is required."},
            },
        },
    ),
    (
        "no answer in time",
        (4, "e", "failed", None, None, None, "request_timeout", "The upstream did not answer within 60 s."),
        {
            "type": "errored",
            "error": {
                "type": "error",
                "error": {"type": "timeout_error", "message": "The upstream did not answer within 60 s."},
            },
        },
    ),
    (
        "no answer at all",
        (5, "f", "failed", None, None, None, "connection_error", "Could not reach the upstream"),
        {
            "type": "errored",
            "error": {
                "type": "error",
                "error": {"type": "api_error", "message": "Could not reach the upstream"},
            },
        },
    ),
    ("canceled", (6, "g", "cancelled", None, None, None, "batch_cancelled", "x"), {"type": "canceled"}),
    ("expired", (7, "h", "expired", None, None, None, "batch_expired", "x"), {"type": "expired"}),
]


@pytest.mark.parametrize("row, result", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_each_state_has_its_line(row: tuple[Any, ...], result: dict[str, Any]) -> None:
    line = result_line(row)
    assert line.endswith(b"\n") and line.count(b"\n") == 1 and b"\xe2\x80\xa8" not in line
    assert orjson.loads(line) == {"custom_id": row[1], "result": result}
    parsed = pydantic.TypeAdapter(MessageBatchIndividualResponse).validate_json(line)
    assert parsed.custom_id == row[1] and parsed.result.type == result["type"]
