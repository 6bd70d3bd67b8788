"""The workflow of one record (`batchgate.workflow`): steps of concurrent model requests, each
step's results posted to the user's callback, which answers with the next step's requests, the
record's output or its failure.

Step 0 is the record's own body (its one request has the record's custom_id as its id). Every
request is a full run of the item (retries, fallbacks, the per-request time limit) with that
body, the record's model filled in; a request that fails is a failed result for the callback,
not the end of the record. The record fails with `workflow_limit_exceeded` when the callback
asks for more steps or requests than its bounds allow, when a step's requests could take it past
`max_tokens` (the tokens used so far, plus each request's estimated input and all the output it
may produce, as the record's budget hold counts them: no such step starts), or when they used
more than that after all, with `workflow_callback_failed` when the callback gave no usable verdict after
its retries, and with `workflow_failed` when the callback answered `failed`.

A cancel of the record's batch is heard between steps (and by requests not yet started): the
record ends `batch_cancelled` with what it used. An expiry drops the record (the executor
cancels it) and results writes it `batch_expired`. A crash or a retry of the record runs it
again from step 0; the callback sees each step again under the same Idempotency-Key.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import orjson
from opentelemetry import trace

from batchgate.internal.v1 import recorder_pb2, scheduler_pb2
from batchgate.services.common.config import Settings
from batchgate.services.common.faults import crash_point
from batchgate.services.common.record_texts import request_tokens
from batchgate.services.common.states import ItemErrorCode
from batchgate.services.common.tool_config import EXTENSION_KEY
from batchgate.services.common.workflow_config import (
    INVALID_CODE,
    InvalidWorkflow,
    WorkflowConfig,
    names_workflow,
    parse_workflow,
    raw_workflow,
    strip_workflow,
)
from batchgate.services.executor.outcomes import NotStarted
from batchgate.services.executor.tools.loop import RunnerTurn, Stoppable, ToolLoop
from batchgate.services.executor.tools.transport import ToolTransport
from batchgate.services.executor.workflows import tally as outcomes
from batchgate.services.executor.workflows import workflow_spans
from batchgate.services.executor.workflows.callback import (
    COMPLETED,
    CONTINUE,
    Callback,
    CallbackFailure,
    Requested,
    Verdict,
)
from batchgate.services.executor.workflows.tally import Tally

C = TypeVar("C", bound=Stoppable)
Turn = Callable[[scheduler_pb2.LeasedItem], Awaitable[recorder_pb2.Outcome]]
INVALID_REQUEST = "invalid_request"


class _Ended(Exception):
    """Ends the workflow with `outcome`."""

    def __init__(self, outcome: recorder_pb2.Outcome) -> None:
        self.outcome = outcome


def _with_body(item: scheduler_pb2.LeasedItem, body: dict[str, Any]) -> scheduler_pb2.LeasedItem:
    one = scheduler_pb2.LeasedItem()
    one.CopyFrom(item)
    one.body = orjson.dumps(body)
    return one


def _refusal(model: str, body: dict[str, Any]) -> str | None:
    """Why a requested body is not run (None: it is)."""
    if body.get("model", model) != model:
        return f"'body.model' must be the record's model {model!r} (or left out)."
    if EXTENSION_KEY in body:
        return f"'body.{EXTENSION_KEY}' is not allowed in a workflow's requests."
    if body.get("stream") is True:
        return "'body.stream' must not be true in a batch."
    return None


class WorkflowLoop:
    """The executor's workflows, over one HTTP transport; any other record goes to the tool
    loop (which runs it once when it has no tool_config)."""

    def __init__(self, settings: Settings, tools: ToolLoop) -> None:
        self._settings = settings
        self._tools = tools
        self._transport = ToolTransport(settings)

    async def close(self) -> None:
        await self._transport.close()

    async def run(
        self, item: scheduler_pb2.LeasedItem, run: RunnerTurn[C], control: C, span: trace.Span | None
    ) -> recorder_pb2.Outcome:
        """The record's outcome: its workflow when its body carries one, else the tool loop's."""
        body = orjson.loads(item.body) if names_workflow(item.body) else None
        named, raw = raw_workflow(body) if isinstance(body, dict) else (False, None)
        if not named or not isinstance(body, dict):
            return await self._tools.run(item, run, control, span)
        tally = Tally()
        try:
            config = parse_workflow(raw, self._settings)
        except InvalidWorkflow as exc:
            return outcomes.failed(item, tally, 0, INVALID_CODE, str(exc))

        async def turn(one: scheduler_pb2.LeasedItem) -> recorder_pb2.Outcome:
            return await run(one, control, span)

        traced = span is not None
        model = self._settings.model(item.model)
        workflow = _Workflow(
            item=item,
            turn=turn,
            traced=traced,
            stopped=control.stop.is_set,
            config=config,
            callback=Callback(self._transport, config, item, traced),
            tally=tally,
            output_default=model.hold_max_tokens if model is not None else 0,
        )
        try:
            return await workflow.run(strip_workflow(body))
        except _Ended as ended:
            return ended.outcome


@dataclass(kw_only=True)
class _Workflow:
    """One record's workflow."""

    item: scheduler_pb2.LeasedItem
    turn: Turn
    traced: bool
    stopped: Callable[[], bool]
    config: WorkflowConfig
    callback: Callback
    tally: Tally
    output_default: int
    """The model's `hold_max_tokens`: a request's output where it sets no maximum."""

    def _end(self, step: int, code: str, why: str) -> _Ended:
        return _Ended(outcomes.failed(self.item, self.tally, step, code, why))

    async def run(self, first: dict[str, Any]) -> recorder_pb2.Outcome:
        requests = [Requested(id=self.item.custom_id, body=first)]
        step = 0
        while True:
            verdict = await self._step(step, requests)
            crash_point("executor.workflows.after_step")
            if verdict.status == COMPLETED:
                return outcomes.completed(self.item, self.tally, verdict.output)
            if verdict.status != CONTINUE:
                why = f"the callback answered 'failed': {orjson.dumps(verdict.error).decode()}"
                raise self._end(step, ItemErrorCode.WORKFLOW_FAILED, why)
            if step + 1 >= self.config.max_steps:
                why = f"the callback asked for step {step + 1}; max_steps is {self.config.max_steps}."
                raise self._end(step, ItemErrorCode.WORKFLOW_LIMIT_EXCEEDED, why)
            if self.stopped():
                raise self._end(step, ItemErrorCode.BATCH_CANCELLED, "the batch was cancelled.")
            step, requests = step + 1, verdict.requests

    async def _step(self, step: int, requests: list[Requested]) -> Verdict:
        """Runs the step's requests concurrently and asks the callback what comes next."""
        if self.tally.requests + len(requests) > self.config.max_requests:
            why = (
                f"{len(requests)} more request(s) would make {self.tally.requests + len(requests)}; "
                f"max_requests is {self.config.max_requests}."
            )
            raise self._end(step, ItemErrorCode.WORKFLOW_LIMIT_EXCEEDED, why)
        could_use = self.tally.tokens + sum(request_tokens(r.body, self.output_default) for r in requests)
        if could_use > self.config.max_tokens:
            limit = self.config.max_tokens
            why = f"its requests could bring it to {could_use} tokens; max_tokens is {limit}."
            raise self._end(step, ItemErrorCode.WORKFLOW_LIMIT_EXCEEDED, why)
        with workflow_spans.step(self.traced, self.item, step, self.config, len(requests)):
            results = await asyncio.gather(*(self._request(step, r) for r in requests))
            self.tally.steps = step + 1
            if any(result is None for result in results):  # the batch stopped before they ran
                if step == 0:
                    raise NotStarted
                raise self._end(step, ItemErrorCode.BATCH_CANCELLED, "the batch was cancelled.")
            if self.tally.tokens > self.config.max_tokens:
                why = f"its requests used {self.tally.tokens} tokens; max_tokens is {self.config.max_tokens}."
                raise self._end(step, ItemErrorCode.WORKFLOW_LIMIT_EXCEEDED, why)
            try:
                return await self.callback.step(step, [r for r in results if r is not None])
            except CallbackFailure as exc:
                raise self._end(step, ItemErrorCode.WORKFLOW_CALLBACK_FAILED, f"{exc}.") from None

    async def _request(self, step: int, request: Requested) -> dict[str, Any] | None:
        """One request's result for the callback (None when the batch stopped before it ran)."""
        self.tally.requests += 1
        refusal = _refusal(self.item.model, request.body) if step else None
        if refusal is not None:
            return outcomes.refused(request.id, INVALID_REQUEST, refusal)
        body = {**request.body, "model": self.item.model}
        with workflow_spans.request(self.traced, step, request.id):
            try:
                outcome = await self.turn(_with_body(self.item, body))
            except NotStarted:
                return None
        self.tally.add(outcome)
        return outcomes.request_result(request.id, outcome)
