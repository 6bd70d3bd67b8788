"""The tool loop of one record: model turn, tool round, model turn, … up to `max_rounds`.

Each model turn is a full run of the item (retries, fallbacks, the per-request time limit)
with the conversation so far, `batchgate.tool_config` stripped. A turn that ends with
`finish_reason: "tool_calls"` starts a tool round at the record's tool server (HTTP or MCP);
its results go back as the assistant message and one `role: "tool"` message per call, and the
model is called again. The record ends with the first answer that asks for no tool, or with
the answer after the last allowed round (still `finish_reason: "tool_calls"`), or, once its
batch stops (cancel), with its last answer: a stop is heard between rounds, and by a turn
waiting to retry. Its `usage` is the sum of every turn's, and its body says how many rounds ran
(`batchgate.tool_rounds`).

A failed turn or tool round ends the record as failed (`tool_execution_failed` for a tool
round, saying which round and why) with the usage of the turns that succeeded before it: the
provider billed them, so the record is billed for them, as a workflow is. No turn starts
that could take the record past its `max_tokens` (the tokens used so far, plus the turn's
estimated input and all the output it may produce, as its budget hold counts them; from the
second turn on, the input is at least what the provider counted for the last turn's prompt and
answer): the record ends `tool_limit_exceeded` instead. A crash or a retry of the record runs
the loop again from the start; tool servers see the same Idempotency-Key for the same round and
call (`calls.idempotency_key`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import orjson
from opentelemetry import trace

from batchgate.internal.v1 import recorder_pb2, scheduler_pb2
from batchgate.services.common.config import Settings
from batchgate.services.common.faults import crash_point
from batchgate.services.common.record_texts import estimate_input_tokens
from batchgate.services.common.states import ItemErrorCode
from batchgate.services.common.token_usage import add_usage, output_allowance, total_tokens, usage_json
from batchgate.services.common.tool_config import (
    InvalidToolConfig,
    ToolConfig,
    parse_tool_config,
    raw_tool_config,
    strip_tool_config,
)
from batchgate.services.executor.outcomes import NotStarted
from batchgate.services.executor.tools import tool_spans
from batchgate.services.executor.tools.calls import (
    FAILURE_CODE,
    ToolCall,
    ToolFailure,
    ToolSession,
    requested_calls,
)
from batchgate.services.executor.tools.http_tools import HttpTools
from batchgate.services.executor.tools.mcp_tools import McpTools
from batchgate.services.executor.tools.transport import ToolTransport

Turn = Callable[[scheduler_pb2.LeasedItem], Awaitable[recorder_pb2.Outcome]]
"""Runs the item once with the body it carries (raises NotStarted when its batch stopped before
the call)."""


class Stoppable(Protocol):
    """What the loop reads of the runner's `Control`: whether the record's batch stopped."""

    stop: asyncio.Event


C = TypeVar("C", bound=Stoppable)
RunnerTurn = Callable[[scheduler_pb2.LeasedItem, C, trace.Span | None], Awaitable[recorder_pb2.Outcome]]
"""The runner's run of one model turn, under its control and in its span."""

MARKER = b'"tool_config"'


def names_tool_config(body: bytes) -> bool:
    """Whether a stored body may carry a tool_config (a byte search: most records don't)."""
    return MARKER in body


@dataclass
class _Progress:
    """What the loop has so far."""

    started: float
    calls: int = 0
    rounds: int = 0
    last: recorder_pb2.Outcome | None = None
    usage: recorder_pb2.TokenUsage | None = None

    @property
    def tokens(self) -> int:
        """Prompt and completion tokens of the turns so far."""
        return total_tokens(self.usage)

    def add(self, outcome: recorder_pb2.Outcome) -> None:
        self.calls += outcome.attempts
        if outcome.state != recorder_pb2.OUTCOME_STATE_SUCCEEDED:
            return
        self.last = outcome
        self.usage = self.usage or recorder_pb2.TokenUsage()
        add_usage(self.usage, outcome.usage)


def _finished(progress: _Progress, answer: dict[str, Any]) -> recorder_pb2.Outcome:
    """The last answer, with every turn's usage and (after a round) the rounds run."""
    assert progress.last is not None and progress.usage is not None
    outcome = recorder_pb2.Outcome()
    outcome.CopyFrom(progress.last)
    outcome.attempts = progress.calls
    outcome.latency_ms = int((time.monotonic() - progress.started) * 1000)
    if progress.rounds:
        outcome.usage.CopyFrom(progress.usage)
        body = {**answer, "usage": usage_json(progress.usage), "batchgate": {"tool_rounds": progress.rounds}}
        outcome.response_body = orjson.dumps(body)
    return outcome


def _failed(
    item: scheduler_pb2.LeasedItem, progress: _Progress, message: str, code: str = FAILURE_CODE
) -> recorder_pb2.Outcome:
    outcome = recorder_pb2.Outcome(
        ref=item.ref,
        state=recorder_pb2.OUTCOME_STATE_FAILED,
        error_code=code,
        error_message=message[:500],
        model=item.model,
    )
    return _billed(outcome, progress)


def _billed(failed: recorder_pb2.Outcome, progress: _Progress) -> recorder_pb2.Outcome:
    """`failed` (the record's end) with every call made and the usage of the turns that
    succeeded, priced as the last of them (its model and provider)."""
    failed.attempts = progress.calls
    if progress.last is not None and progress.usage is not None:
        failed.usage.CopyFrom(progress.usage)
        failed.model, failed.provider = progress.last.model, progress.last.provider
    return failed


def _with_body(item: scheduler_pb2.LeasedItem, body: dict[str, Any]) -> scheduler_pb2.LeasedItem:
    turn = scheduler_pb2.LeasedItem()
    turn.CopyFrom(item)
    turn.body = orjson.dumps(body)
    return turn


def _replies(answer: dict[str, Any], calls: list[ToolCall], contents: list[str]) -> list[dict[str, Any]]:
    """The assistant's tool-calling message and one tool message per call, as the model's
    next turn reads them."""
    message = answer["choices"][0]["message"]
    assistant = {"role": "assistant", "content": message.get("content"), "tool_calls": [c.raw for c in calls]}
    tools = [
        {"role": "tool", "tool_call_id": c.id, "content": text}
        for c, text in zip(calls, contents, strict=True)
    ]
    return [assistant, *tools]


class ToolLoop:
    """The executor's tool loops, over one tool transport (closed with the runner)."""

    def __init__(self, settings: Settings) -> None:
        self._transport = ToolTransport(settings)
        self._settings = settings

    async def close(self) -> None:
        await self._transport.close()

    def _session(self, config: ToolConfig, item: scheduler_pb2.LeasedItem, traced: bool) -> ToolSession:
        if config.type == "mcp":
            return McpTools(self._transport, config, item, traced)
        return HttpTools(self._transport, config, item, traced)

    async def run(
        self, item: scheduler_pb2.LeasedItem, run: RunnerTurn[C], control: C, span: trace.Span | None
    ) -> recorder_pb2.Outcome:
        """The record's outcome: its one `run` (the runner's), or when its body carries a
        tool_config, its tool loop with a `run` per model turn. A stop of the record's batch
        (`control.stop`) is heard between rounds."""

        if not names_tool_config(item.body):
            return await run(item, control, span)
        body = orjson.loads(item.body)
        named, raw = raw_tool_config(body) if isinstance(body, dict) else (False, None)
        if not named:
            return await run(item, control, span)

        async def turn(one: scheduler_pb2.LeasedItem) -> recorder_pb2.Outcome:
            return await run(one, control, span)

        progress = _Progress(time.monotonic())
        try:
            config = parse_tool_config(raw, self._settings)
        except InvalidToolConfig as exc:
            return _failed(item, progress, f"The tool_config cannot be used: {exc}")
        traced = span is not None
        session = self._session(config, item, traced)
        try:
            model = self._settings.model(item.model)
            output_default = model.hold_max_tokens if model is not None else 0
            loop = _Run(item, turn, traced, control.stop.is_set, config, session, output_default)
            return await loop.run(strip_tool_config(body), progress)
        finally:
            task = asyncio.current_task()
            if task is None or not task.cancelling():  # a dropped record does not wait for it
                await session.close()


@dataclass
class _Run:
    """One record's loop."""

    item: scheduler_pb2.LeasedItem
    turn: Turn
    traced: bool
    stopped: Callable[[], bool]
    config: ToolConfig
    session: ToolSession
    output_default: int
    """The model's `hold_max_tokens`: a turn's output where its request sets no maximum."""

    async def run(self, request: dict[str, Any], progress: _Progress) -> recorder_pb2.Outcome:
        messages = list(request.get("messages") or [])
        added: list[dict[str, Any]] = []
        while True:
            body = {**request, "messages": messages}
            could_use = progress.tokens + self._turn_tokens(body, added, progress.last)
            if could_use > self.config.max_tokens:
                why = (
                    f"Model turn {progress.rounds + 1} could bring the record to {could_use} tokens; "
                    f"max_tokens is {self.config.max_tokens}."
                )
                return _failed(self.item, progress, why, ItemErrorCode.TOOL_LIMIT_EXCEEDED)
            with tool_spans.model_turn(self.traced, self.item, progress.rounds + 1):
                try:
                    outcome = await self.turn(_with_body(self.item, body))
                except NotStarted:
                    if progress.last is None:
                        raise
                    return _finished(progress, orjson.loads(progress.last.response_body))
            progress.add(outcome)
            if outcome.state != recorder_pb2.OUTCOME_STATE_SUCCEEDED:
                if self.stopped() and progress.last is not None:  # a cancel cut its retries short
                    return _finished(progress, orjson.loads(progress.last.response_body))
                return _billed(outcome, progress)
            answer = orjson.loads(outcome.response_body)
            number = progress.rounds + 1
            try:
                calls = requested_calls(answer)
                if not calls or progress.rounds >= self.config.max_rounds or self.stopped():
                    return _finished(progress, answer)
                with tool_spans.tool_round(self.traced, self.item, number, self.config, len(calls)):
                    contents = await self.session.run_round(number, calls)
            except ToolFailure as exc:
                return _failed(self.item, progress, f"Tool round {number} failed: {exc}.")
            progress.rounds = number
            crash_point("executor.tools.after_round")
            added = _replies(answer, calls, contents)
            messages.extend(added)

    def _turn_tokens(
        self, body: dict[str, Any], added: list[dict[str, Any]], last: recorder_pb2.Outcome | None
    ) -> int:
        """The most tokens the next turn may use: its estimated input, but never less than what
        the last turn read and wrote, as the provider counted it, plus the messages added since
        (the estimate reads images and other parts by their text alone), and all its output."""
        input_tokens = estimate_input_tokens(body)
        if last is not None:
            seen = last.usage.prompt_tokens + last.usage.completion_tokens
            input_tokens = max(input_tokens, seen + estimate_input_tokens({"messages": added}))
        return input_tokens + output_allowance(body, self.output_default)
