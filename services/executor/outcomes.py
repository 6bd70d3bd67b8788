"""The outcome an executor reports for an item (`recorder_pb2.Outcome`): a success, a failure
with the last answer or transport error, or, for an item whose batch stopped, its last answer
(`NotStarted` when it made no call, so that it is handed back instead)."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from batchgate.internal.v1 import recorder_pb2, scheduler_pb2
from batchgate.services.common.catalogue import ModelConfig
from batchgate.services.common.message_budget import ENTRY_OVERHEAD
from batchgate.services.common.token_usage import usage_of
from batchgate.services.executor.upstream import UpstreamAnswer

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TransportFailure:
    """No HTTP answer: the time limit passed or the connection failed (retried), or no usable
    one (`retryable` False: the same call would fail the same way)."""

    code: str
    message: str
    retryable: bool = True


Result = UpstreamAnswer | TransportFailure


def outcome_bytes(outcome: recorder_pb2.Outcome) -> int:
    """About what `outcome` weighs in a RecordResults message, never less (cheaper than
    `ByteSize`, which walks every field)."""
    return len(outcome.response_body) + 4 * len(outcome.error_message) + ENTRY_OVERHEAD


class NotStarted(Exception):
    """The item's batch stopped before the item's first upstream call: hand it back."""


def logged(item: scheduler_pb2.LeasedItem, outcome: recorder_pb2.Outcome) -> recorder_pb2.Outcome:
    """A failed item is logged (inside its run span when traced, so the line leads to the trace)."""
    if outcome.state != recorder_pb2.OUTCOME_STATE_SUCCEEDED:
        log.info(
            "%s/%d failed: %s after %d upstream call(s)",
            item.ref.batch_id,
            item.ref.index,
            outcome.error_code or f"HTTP {outcome.status_code}",
            outcome.attempts,
            extra={"batch_id": item.ref.batch_id, "item_index": item.ref.index, "custom_id": item.custom_id},
        )
    return outcome


def internal_failure(item: scheduler_pb2.LeasedItem, exc: Exception) -> recorder_pb2.Outcome:
    """A bug in an adapter must not lose the item: it is logged and recorded failed."""
    log.error(
        "running %s/%d failed",
        item.ref.batch_id,
        item.ref.index,
        exc_info=exc,
        extra={"batch_id": item.ref.batch_id, "item_index": item.ref.index, "custom_id": item.custom_id},
    )
    return recorder_pb2.Outcome(
        ref=item.ref,
        state=recorder_pb2.OUTCOME_STATE_FAILED,
        error_code="internal_error",
        error_message=repr(exc)[:500],
        model=item.model,
    )


def stopped(
    item: scheduler_pb2.LeasedItem, last: tuple[Result, ModelConfig] | None, calls: int
) -> recorder_pb2.Outcome:
    """The outcome of an item whose batch stopped: its last answer, if it made any call."""
    if not calls or last is None:
        raise NotStarted
    result, model = last
    return failure(item, result, model.name, model.provider, calls)


def ms_since(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


def success(
    item: scheduler_pb2.LeasedItem,
    answer: UpstreamAnswer,
    model: str,
    provider: str,
    calls: int,
    latency_ms: int,
) -> recorder_pb2.Outcome:
    return recorder_pb2.Outcome(
        ref=item.ref,
        state=recorder_pb2.OUTCOME_STATE_SUCCEEDED,
        status_code=answer.status_code,
        response_body=answer.body,
        request_id=answer.request_id,
        model=model,
        provider=provider,
        usage=usage_of(answer.parsed),
        attempts=calls,
        latency_ms=latency_ms,
    )


def failure(
    item: scheduler_pb2.LeasedItem, result: Result, model: str, provider: str, calls: int
) -> recorder_pb2.Outcome:
    outcome = recorder_pb2.Outcome(
        ref=item.ref,
        state=recorder_pb2.OUTCOME_STATE_FAILED,
        model=model,
        provider=provider,
        attempts=calls,
    )
    if isinstance(result, UpstreamAnswer):
        outcome.status_code = result.status_code
        outcome.response_body = result.body
        outcome.request_id = result.request_id
    else:
        outcome.error_code = result.code
        outcome.error_message = result.message
    return outcome
