"""MCP tool servers over Streamable HTTP (JSON-RPC 2.0 on one POST endpoint, protocol
2025-03-26 or later), one session per record loop.

Before its first tool call the session sends `initialize` (clientInfo `batchgate`) and
`notifications/initialized`, then sends the server's `Mcp-Session-Id` (when it gave one) and
the agreed `MCP-Protocol-Version` on every request. A server that answers `initialize` with
404 or 405 is taken as stateless and gets `tools/call` directly; 401/403 or any other failure
fails the record. Each model tool call is one `tools/call` (the calls of a round run at once)
with the function's name and its parsed arguments, plus `_context` when the record's
`context` is set. Answers come as `application/json` or as `text/event-stream`, read until the
response to the request arrives (the spec has the server close the stream then, but only as a
SHOULD). The text items of a result are its content; a result with
`isError: true` is still delivered to the model (the model may recover), while a JSON-RPC
error fails the record. The session is ended with DELETE when the loop is done.

Why not the `mcp` SDK's client: it runs each session as anyio task groups with memory
streams over its own httpx2 client, has no per-request headers (Idempotency-Key), no hook for
the executor's guarded resolver, and cannot express the 404/405 stateless fallback; the part
batchgate needs is three JSON-RPC exchanges, written here over the executor's aiohttp transport.
The tests run it against real servers built with the SDK.
"""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass, field
from typing import Any

import orjson

from batchgate.internal.v1 import scheduler_pb2
from batchgate.services.common.tool_config import ToolConfig
from batchgate.services.executor.tools.calls import ToolCall, ToolFailure, idempotency_key
from batchgate.services.executor.tools.http_tools import request_headers
from batchgate.services.executor.tools.tool_spans import execute_tool
from batchgate.services.executor.tools.transport import Enough, ToolAnswer, ToolTransport, to_the_end

PROTOCOL_VERSION = "2025-06-18"
OLDEST_VERSION = "2025-03-26"
STATELESS_STATUSES = (404, 405)
REFUSED_STATUSES = (401, 403)
CLOSE_TIMEOUT_S = 2.0
CLIENT_VERSION = "0.1.0"


def _sse_messages(raw: bytes) -> list[Any]:
    """The JSON messages of an event stream (each event's `data:` lines joined)."""
    messages = []
    for event in raw.replace(b"\r\n", b"\n").split(b"\n\n"):
        data = [line[5:].removeprefix(b" ") for line in event.split(b"\n") if line.startswith(b"data:")]
        if data:
            try:
                messages.append(orjson.loads(b"\n".join(data)))
            except orjson.JSONDecodeError:
                continue
    return messages


def _answers(messages: list[Any], request_id: int) -> list[dict[str, Any]]:
    """The JSON-RPC responses to `request_id` among `messages`."""
    return [
        m
        for m in messages
        if isinstance(m, dict) and m.get("id") == request_id and ("result" in m or "error" in m)
    ]


def _answered(request_id: int) -> Enough:
    """Whether an event stream read so far holds the response to `request_id`."""
    return lambda raw: bool(_answers(_sse_messages(raw), request_id))


def jsonrpc_response(answer: ToolAnswer, request_id: int) -> dict[str, Any]:
    """The JSON-RPC response to `request_id` in an answer; raises ToolFailure."""
    kind = answer.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind == "text/event-stream":
        messages = _sse_messages(answer.body)
    else:
        try:
            parsed = orjson.loads(answer.body)
        except orjson.JSONDecodeError:
            raise ToolFailure("the MCP server's answer is not JSON") from None
        messages = parsed if isinstance(parsed, list) else [parsed]
    responses = _answers(messages, request_id)
    if not responses:
        raise ToolFailure("the MCP server's answer holds no JSON-RPC response")
    response: dict[str, Any] = responses[-1]
    error = response.get("error")
    if error is not None:
        code = error.get("code") if isinstance(error, dict) else None
        message = str(error.get("message", ""))[:300] if isinstance(error, dict) else ""
        raise ToolFailure(f"the MCP server answered JSON-RPC error {code}: {message}")
    if not isinstance(response.get("result"), dict):
        raise ToolFailure("the MCP server's JSON-RPC result is not an object")
    return response


def tool_content(result: dict[str, Any]) -> str:
    """What the model sees of a `tools/call` result: its text items, concatenated (a result
    with `isError: true` too); with no text, its structured content as JSON."""
    content = result.get("content")
    texts = [
        str(item.get("text", ""))
        for item in (content if isinstance(content, list) else [])
        if isinstance(item, dict) and item.get("type") == "text"
    ]
    if not texts and result.get("structuredContent") is not None:
        return orjson.dumps(result["structuredContent"]).decode()
    return "".join(texts)


@dataclass
class McpTools:
    transport: ToolTransport
    config: ToolConfig
    item: scheduler_pb2.LeasedItem
    traced: bool
    _session_id: str | None = None
    _version: str = PROTOCOL_VERSION
    _ready: bool = False
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def _headers(self, key: str | None = None) -> dict[str, str]:
        headers = request_headers(self.config, key)
        headers["accept"] = "application/json, text/event-stream"
        if self._ready:
            headers["mcp-protocol-version"] = self._version
        if self._session_id is not None:
            headers["mcp-session-id"] = self._session_id
        return headers

    async def _post(self, message: dict[str, Any], key: str | None = None) -> ToolAnswer:
        request_id = message.get("id")  # a notification has none: nothing answers it
        return await self.transport.send(
            "POST",
            self.config.url,
            body=orjson.dumps({"jsonrpc": "2.0", **message}),
            headers=self._headers(key),
            timeout_s=self.config.timeout_ms / 1000,
            traced=self.traced,
            until=to_the_end if request_id is None else _answered(request_id),
        )

    async def _initialize(self) -> None:
        request_id = next(self._ids)
        params = {
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "batchgate", "version": CLIENT_VERSION},
        }
        answer = await self._post({"id": request_id, "method": "initialize", "params": params})
        if answer.status in STATELESS_STATUSES:
            self._ready = True  # a stateless server: tools/call needs no handshake
            return
        if answer.status in REFUSED_STATUSES:
            raise ToolFailure(f"the MCP server refused initialize with HTTP {answer.status}")
        if not answer.ok:
            raise ToolFailure(f"the MCP server answered initialize with HTTP {answer.status}")
        result = jsonrpc_response(answer, request_id)["result"]
        version = result.get("protocolVersion")
        if not isinstance(version, str) or version < OLDEST_VERSION:
            raise ToolFailure(
                f"the MCP server speaks protocol {version!r}; batchgate needs {OLDEST_VERSION} or later"
            )
        self._version = version
        self._session_id = answer.headers.get("mcp-session-id")
        self._ready = True
        notified = await self._post({"method": "notifications/initialized"})
        if not notified.ok:
            raise ToolFailure(
                f"the MCP server answered notifications/initialized with HTTP {notified.status}"
            )

    async def _call(self, round_number: int, call: ToolCall) -> str:
        try:
            arguments = orjson.loads(call.arguments or "{}")
        except orjson.JSONDecodeError:
            arguments = None
        if not isinstance(arguments, dict):
            raise ToolFailure(f"the model's arguments for {call.name!r} are not a JSON object")
        if self.config.context is not None:
            arguments["_context"] = self.config.context
        request_id = next(self._ids)
        message = {
            "id": request_id,
            "method": "tools/call",
            "params": {"name": call.name, "arguments": arguments},
        }
        with execute_tool(self.traced, call.name, call.id):
            answer = await self._post(message, idempotency_key(self.item, round_number, [call.id]))
        if not answer.ok:
            raise ToolFailure(f"the MCP server answered tools/call {call.name!r} with HTTP {answer.status}")
        return tool_content(jsonrpc_response(answer, request_id)["result"])

    async def run_round(self, round_number: int, calls: list[ToolCall]) -> list[str]:
        if not self._ready:
            await self._initialize()
        done = await asyncio.gather(*(self._call(round_number, c) for c in calls), return_exceptions=True)
        failure = next((d for d in done if isinstance(d, BaseException)), None)
        if failure is not None:
            raise failure
        return [d for d in done if isinstance(d, str)]

    async def close(self) -> None:
        """End the server's session (best effort: it also ends by itself when idle)."""
        if self._session_id is None:
            return
        try:
            await self.transport.send(
                "DELETE",
                self.config.url,
                body=b"",
                headers=self._headers(),
                timeout_s=min(CLOSE_TIMEOUT_S, self.config.timeout_ms / 1000),
                traced=False,
            )
        except ToolFailure:
            pass
