"""The workflow callback: one POST per step, and what its answer says.

A step's call carries `{"custom_id", "context", "step", "results"}` with the record's
`authorization` and an `Idempotency-Key` that is the same for every repeat of that step (a
retry here, a re-run of the record after a crash). A non-2xx answer, no answer within
`timeout_ms` or an answer that is not a verdict is retried (`ATTEMPTS` in all, pausing
`PAUSE_S` doubled each time); then the step fails with `CallbackFailure`. The HTTP goes through
the tool calling's transport (`services.executor.tools.transport`): same address policy
(`tool_allowed_networks`), answer size limit, no redirects, a client span when traced.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import orjson

from batchgate.internal.v1 import scheduler_pb2
from batchgate.services.common.workflow_config import WorkflowConfig
from batchgate.services.executor.tools.calls import ToolFailure, idempotency_key
from batchgate.services.executor.tools.http_tools import request_headers
from batchgate.services.executor.tools.transport import ToolTransport

ATTEMPTS = 3
PAUSE_S = 0.5
CONTINUE, COMPLETED, FAILED = "continue", "completed", "failed"
KEY_PART = "workflow"
"""Keeps a step's Idempotency-Key apart from a tool round's of the same number."""


class CallbackFailure(Exception):
    """The callback gave no usable verdict for a step; the message says why (no secret)."""


@dataclass(frozen=True, kw_only=True)
class Requested:
    """One request the callback asked for: its id (echoed in the results) and body."""

    id: str
    body: dict[str, Any]


@dataclass(frozen=True, kw_only=True)
class Verdict:
    status: str
    requests: list[Requested] = field(default_factory=list)
    output: Any = None
    error: Any = None


def _requests(raw: Any) -> list[Requested]:
    if not isinstance(raw, list) or not raw:
        raise CallbackFailure("a 'continue' answer needs a non-empty 'requests' list")
    read: list[Requested] = []
    for number, request in enumerate(raw):
        if not isinstance(request, dict) or not isinstance(request.get("id"), str) or not request["id"]:
            raise CallbackFailure(f"requests[{number}] has no string 'id'")
        if not isinstance(request.get("body"), dict):
            raise CallbackFailure(f"requests[{number}] has no object 'body'")
        read.append(Requested(id=request["id"], body=request["body"]))
    if len({r.id for r in read}) != len(read):
        raise CallbackFailure("the ids of 'requests' are not unique")
    return read


def read_verdict(answer: Any) -> Verdict:
    """The callback's parsed answer as a verdict; raises CallbackFailure when malformed."""
    status = answer.get("status") if isinstance(answer, dict) else None
    if status == CONTINUE:
        return Verdict(status=status, requests=_requests(answer.get("requests")))
    if status == COMPLETED:
        return Verdict(status=status, output=answer.get("output"))
    if status == FAILED:
        return Verdict(status=status, error=answer.get("error"))
    raise CallbackFailure(f"the answer's 'status' is not one of {CONTINUE}, {COMPLETED}, {FAILED}")


@dataclass
class Callback:
    """The callback of one record."""

    transport: ToolTransport
    config: WorkflowConfig
    item: scheduler_pb2.LeasedItem
    traced: bool

    async def step(self, number: int, results: list[dict[str, Any]]) -> Verdict:
        """The callback's verdict on step `number`'s `results`; raises CallbackFailure."""
        payload = orjson.dumps(
            {
                "custom_id": self.item.custom_id,
                "context": self.config.context,
                "step": number,
                "results": results,
            }
        )
        headers = request_headers(self.config, idempotency_key(self.item, number, [KEY_PART]))
        why = ""
        for attempt in range(ATTEMPTS):
            if attempt:
                await asyncio.sleep(PAUSE_S * 2 ** (attempt - 1))
            try:
                return await self._once(payload, headers)
            except CallbackFailure as exc:
                why = str(exc)
        raise CallbackFailure(f"{why} (after {ATTEMPTS} attempts)")

    async def _once(self, payload: bytes, headers: dict[str, str]) -> Verdict:
        try:
            answer = await self.transport.send(
                "POST",
                self.config.url,
                body=payload,
                headers=dict(headers),
                timeout_s=self.config.timeout_ms / 1000,
                traced=self.traced,
            )
        except ToolFailure as exc:
            raise CallbackFailure(str(exc).replace("tool ", "callback ")) from None
        if not answer.ok:
            raise CallbackFailure(f"the callback answered HTTP {answer.status}")
        try:
            parsed = orjson.loads(answer.body)
        except orjson.JSONDecodeError:
            raise CallbackFailure("the callback's answer is not JSON") from None
        return read_verdict(parsed)
