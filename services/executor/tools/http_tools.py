"""The HTTP tool protocol: one POST per round to the record's `tool_config.url`.

Request: `{"custom_id", "context", "tool_calls"}` (the model's tool calls as it sent them),
with `Authorization` (the record's `authorization`, when set) and an `Idempotency-Key` that
is the same for every repeat of the round. Answer: 2xx with
`{"results": [{"tool_call_id", "content"}]}`, one result (a string) per call. Anything else
(another status, no answer within `timeout_ms`, a malformed body) fails the round.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from batchgate.internal.v1 import scheduler_pb2
from batchgate.services.common.tool_config import ToolConfig
from batchgate.services.executor.tools.calls import ToolCall, ToolFailure, idempotency_key
from batchgate.services.executor.tools.transport import ToolTransport


class Authorized(Protocol):
    """A record's extension object with an `authorization` header (tool_config, workflow)."""

    @property
    def authorization(self) -> str | None: ...


def request_headers(config: Authorized, key: str | None) -> dict[str, str]:
    """The headers every tool request (HTTP and MCP alike) and workflow callback carries."""
    headers = {"content-type": "application/json"}
    if config.authorization is not None:
        headers["authorization"] = config.authorization
    if key is not None:
        headers["idempotency-key"] = key
    return headers


def _contents(answer: Any, calls: list[ToolCall]) -> list[str]:
    """Each call's content from a `{"results": […]}` answer; raises ToolFailure."""
    results = answer.get("results") if isinstance(answer, dict) else None
    if not isinstance(results, list):
        raise ToolFailure("the tool server's answer has no 'results' list")
    by_id: dict[str, str] = {}
    for number, result in enumerate(results):
        if not isinstance(result, dict) or not isinstance(result.get("tool_call_id"), str):
            raise ToolFailure(f"results[{number}] of the tool server's answer has no 'tool_call_id'")
        if not isinstance(result.get("content"), str):
            raise ToolFailure(f"results[{number}] of the tool server's answer has no string 'content'")
        by_id[result["tool_call_id"]] = result["content"]
    missing = [call.id for call in calls if call.id not in by_id]
    if missing:
        raise ToolFailure(f"the tool server's answer has no result for tool call {missing[0]}")
    return [by_id[call.id] for call in calls]


@dataclass
class HttpTools:
    transport: ToolTransport
    config: ToolConfig
    item: scheduler_pb2.LeasedItem
    traced: bool

    async def run_round(self, round_number: int, calls: list[ToolCall]) -> list[str]:
        payload = orjson.dumps(
            {
                "custom_id": self.item.custom_id,
                "context": self.config.context,
                "tool_calls": [call.raw for call in calls],
            }
        )
        key = idempotency_key(self.item, round_number, [call.id for call in calls])
        answer = await self.transport.send(
            "POST",
            self.config.url,
            body=payload,
            headers=request_headers(self.config, key),
            timeout_s=self.config.timeout_ms / 1000,
            traced=self.traced,
        )
        if not answer.ok:
            raise ToolFailure(f"the tool server answered HTTP {answer.status}")
        try:
            parsed = orjson.loads(answer.body)
        except orjson.JSONDecodeError:
            raise ToolFailure("the tool server's answer is not JSON") from None
        return _contents(parsed, calls)

    async def close(self) -> None:
        """Nothing is held between rounds."""
