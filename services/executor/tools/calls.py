"""What a tool round works with: the model's tool calls, the failure that ends a record, the
Idempotency-Key of a tool request, and the shape every tool client has (`ToolSession`)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from batchgate.internal.v1 import scheduler_pb2

FAILURE_CODE = "tool_execution_failed"


class ToolFailure(Exception):
    """A tool round could not deliver results; the message says why (no secret in it)."""


@dataclass(frozen=True, kw_only=True)
class ToolCall:
    """One function call the model asked for, as it sent it (`raw`) and read."""

    id: str
    name: str
    arguments: str
    """The model's JSON text of the arguments."""
    raw: dict[str, Any]


def requested_calls(answer: Any) -> list[ToolCall]:
    """The tool calls of a chat answer that ended with `finish_reason: "tool_calls"` (else
    none); raises ToolFailure when the model's calls are not usable."""
    choices = answer.get("choices") if isinstance(answer, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return []
    choice = choices[0]
    message = choice.get("message")
    if choice.get("finish_reason") != "tool_calls" or not isinstance(message, dict):
        return []
    calls = message.get("tool_calls")
    if not isinstance(calls, list) or not calls:
        return []
    read = []
    for number, call in enumerate(calls):
        function = call.get("function") if isinstance(call, dict) else None
        if (
            not isinstance(function, dict)
            or not isinstance(call.get("id"), str)
            or not isinstance(function.get("name"), str)
        ):
            raise ToolFailure(f"the model's tool call {number} has no id or function name")
        read.append(ToolCall(id=call["id"], name=function["name"], arguments=_arguments(function), raw=call))
    return read


def idempotency_key(item: scheduler_pb2.LeasedItem, round_number: int, call_ids: Sequence[str]) -> str:
    """The same for every repeat of one tool request (a retry, a re-run after a crash):
    derived from the batch, the custom_id, the round and the tool call id(s), hashed so that it
    is a plain header value whatever the custom_id holds."""
    parts = [item.ref.batch_id, item.custom_id, str(round_number), *call_ids]
    return "bg-" + hashlib.sha256("\0".join(parts).encode()).hexdigest()[:40]


class ToolSession(Protocol):
    """A record's connection to its tool server, for the rounds of one loop."""

    async def run_round(self, round_number: int, calls: list[ToolCall]) -> list[str]:
        """Each call's result content, in the calls' order; raises ToolFailure."""
        ...

    async def close(self) -> None:
        """Let go of what the session holds at the server (best effort)."""
        ...


def _arguments(function: dict[str, Any]) -> str:
    """The call's arguments as JSON text: OpenAI sends a string, some OpenAI-compatible servers
    (Ollama) the object itself, which had reached MCP servers as `{}`; none given is `{}`."""
    arguments = function.get("arguments")
    if isinstance(arguments, str):
        return arguments
    return "{}" if arguments is None else orjson.dumps(arguments).decode()
