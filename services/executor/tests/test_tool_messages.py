"""The pure parts of tool calling: what the model sees of a record, which tool calls an answer
asks for, Idempotency-Keys, and reading MCP answers (JSON or an event stream)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from batchgate.internal.v1 import items_pb2, scheduler_pb2
from batchgate.services.common.tool_config import strip_tool_config
from batchgate.services.executor.tools.calls import ToolFailure, idempotency_key, requested_calls
from batchgate.services.executor.tools.mcp_tools import jsonrpc_response, tool_content
from batchgate.services.executor.tools.transport import ToolAnswer


def test_the_model_sees_no_tool_config_and_other_extension_keys_stay() -> None:
    alone = {"model": "m", "batchgate": {"tool_config": {"url": "https://t.example/"}}}
    assert strip_tool_config(alone) == {"model": "m"}
    shared = {"model": "m", "batchgate": {"tool_config": {}, "note": 1}}
    assert strip_tool_config(shared) == {"model": "m", "batchgate": {"note": 1}}
    plain = {"model": "m", "batchgate": {"note": 1}}
    assert strip_tool_config(plain) is plain


def _answer(reason: str, calls: Any) -> dict[str, Any]:
    return {"choices": [{"finish_reason": reason, "message": {"role": "assistant", "tool_calls": calls}}]}


def test_only_a_tool_calls_finish_asks_for_tools() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}
    assert [c.id for c in requested_calls(_answer("tool_calls", [call]))] == ["c1"]
    assert requested_calls(_answer("stop", [call])) == []
    assert requested_calls(_answer("tool_calls", [])) == []
    assert requested_calls({"error": {}}) == []
    with pytest.raises(ToolFailure, match="tool call 0 has no id"):
        requested_calls(_answer("tool_calls", [{"type": "function", "function": {"name": "f"}}]))


def test_arguments_sent_as_an_object_are_kept_as_json_text() -> None:
    """Ollama sends the arguments object itself: it had become `{}`."""
    as_object = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": {"q": "order-1"}}}
    none_given = {"id": "c2", "type": "function", "function": {"name": "f"}}
    read = requested_calls(_answer("tool_calls", [as_object, none_given]))
    assert [orjson.loads(c.arguments) for c in read] == [{"q": "order-1"}, {}]


def test_idempotency_keys_are_stable_distinct_and_plain_header_values() -> None:
    item = scheduler_pb2.LeasedItem(ref=items_pb2.ItemRef(batch_id="batch_a", index=3), custom_id="ünï\ncode")
    key = idempotency_key(item, 1, ["c1"])
    assert key == idempotency_key(item, 1, ["c1"]) and key.isascii() and key.startswith("bg-")
    other_batch = scheduler_pb2.LeasedItem(ref=items_pb2.ItemRef(batch_id="batch_b"), custom_id="ünï\ncode")
    assert (
        len(
            {
                key,
                idempotency_key(item, 2, ["c1"]),
                idempotency_key(item, 1, ["c2"]),
                idempotency_key(other_batch, 1, ["c1"]),
            }
        )
        == 4
    )


def _sse(*messages: dict[str, Any]) -> ToolAnswer:
    events = b"".join(b"event: message\r\ndata: " + orjson.dumps(m) + b"\r\n\r\n" for m in messages)
    return ToolAnswer(200, {"content-type": "text/event-stream"}, b": ping\n\n" + events)


def test_an_event_stream_answer_counts_its_last_response_to_the_request() -> None:
    progress = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}}
    first = {"jsonrpc": "2.0", "id": 4, "result": {"content": [{"type": "text", "text": "early"}]}}
    last = {
        "jsonrpc": "2.0",
        "id": 4,
        "result": {
            "content": [{"type": "text", "text": "a"}, {"type": "image"}, {"type": "text", "text": "b"}]
        },
    }
    assert tool_content(jsonrpc_response(_sse(progress, first, last), 4)["result"]) == "ab"
    with pytest.raises(ToolFailure, match="no JSON-RPC response"):
        jsonrpc_response(_sse(progress), 4)


def test_a_json_answer_and_its_errors() -> None:
    ok = ToolAnswer(
        200,
        {"content-type": "application/json"},
        orjson.dumps({"jsonrpc": "2.0", "id": 1, "result": {"structuredContent": {"n": 1}, "content": []}}),
    )
    assert tool_content(jsonrpc_response(ok, 1)["result"]) == '{"n":1}'
    error = ToolAnswer(
        200,
        {"content-type": "application/json"},
        orjson.dumps({"jsonrpc": "2.0", "id": 1, "error": {"code": -32602, "message": "Unknown tool"}}),
    )
    with pytest.raises(ToolFailure, match="JSON-RPC error -32602: Unknown tool"):
        jsonrpc_response(error, 1)
    with pytest.raises(ToolFailure, match="not JSON"):
        jsonrpc_response(ToolAnswer(200, {"content-type": "application/json"}, b"<html>"), 1)
