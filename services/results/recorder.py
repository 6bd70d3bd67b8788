"""Storing outcomes exactly once, and keeping each batch's progress current.

Per batch in a RecordResults group, in one transaction: read the items' lease state (locked
on PostgreSQL), accept the outcomes whose fencing token is the item's latest lease, store them
with one executemany, add one usage event per accepted item, and fold the group's counts,
tokens and cost into the batch row with one UPDATE. A repeat of an already stored outcome
(same token) is acknowledged as a duplicate; anything else stale is refused.

The latest lease is `attempt == token` with the item `leased`, or `queued` again because the
lease lapsed but nobody has leased it since: nothing else can be running it, so the late
result is kept rather than paid for twice. The batch row is locked before its items, the
order the scheduler's closing statements use too, so the two never deadlock.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from batchgate.internal.v1 import items_pb2, recorder_pb2
from batchgate.services.common import telemetry
from batchgate.services.common.config import Settings
from batchgate.services.common.db import Connection, Database, batches, items, usage
from batchgate.services.common.states import ITEM_OPEN, ITEM_REPORTED, ItemState, UsageSource
from batchgate.services.results.metrics import ResultsMetrics, error_code
from batchgate.services.results.pricing import item_cost

SUCCEEDED = recorder_pb2.OUTCOME_STATE_SUCCEEDED
FAILED = recorder_pb2.OUTCOME_STATE_FAILED


@dataclass
class RecordSummary:
    accepted: int = 0
    duplicates: int = 0
    refused: list[items_pb2.ItemRef] = field(default_factory=list)
    settled: list[str] = field(default_factory=list)  # batches with nothing open any more
    outcomes: Counter[tuple[str, str]] = field(default_factory=Counter)
    """Stored outcomes by (state, error code)."""
    traced: list[_Traced] = field(default_factory=list)
    """What happened to the outcomes of traced items, for their spans."""


@dataclass(frozen=True)
class _Traced:
    outcome: recorder_pb2.Outcome
    custom_id: str
    result: str
    """accepted, duplicate or refused."""
    cost_usd: float = 0.0


class Recorder:
    def __init__(self, settings: Settings, db: Database, metrics: ResultsMetrics | None = None) -> None:
        self._settings = settings
        self._db = db
        self._metrics = metrics or ResultsMetrics()

    async def record(self, outcomes: Sequence[recorder_pb2.Outcome]) -> RecordSummary:
        started_ns = time.time_ns()
        by_batch: dict[str, list[recorder_pb2.Outcome]] = defaultdict(list)
        for outcome in outcomes:
            by_batch[outcome.ref.batch_id].append(outcome)
        summary = RecordSummary()
        async with self._db.write() as conn:
            for batch_id, group in by_batch.items():
                await self._record_batch(conn, batch_id, group, summary)
        self._metrics.finished(summary.outcomes)
        for traced in summary.traced:  # stored (committed): their spans can say so
            _record_span(traced, started_ns)
        return summary

    async def _record_batch(
        self, conn: Connection, batch_id: str, group: list[recorder_pb2.Outcome], summary: RecordSummary
    ) -> None:
        batch = await batches.lock_for_record(self._db, conn, batch_id)
        if batch is None:
            summary.refused += [o.ref for o in group]
            return
        current = await items.lock_current(self._db, conn, batch_id, [o.ref.index for o in group])
        now = time.time()
        rows: list[dict[str, Any]] = []
        taken: set[int] = set()
        for outcome in group:
            ref = outcome.ref
            item = current.get(ref.index)
            same_lease = item is not None and ref.attempt > 0 and item.attempt == ref.attempt
            state = item.state if item is not None else None
            if same_lease and (state in ITEM_REPORTED or ref.index in taken):
                summary.duplicates += 1
                result = "duplicate"
            elif same_lease and state in ITEM_OPEN and outcome.state in (SUCCEEDED, FAILED):
                rows.append(self._row(batch_id, outcome, batch.discount, now))
                taken.add(ref.index)
                result = "accepted"
            else:
                summary.refused.append(ref)
                result = "refused"
            if telemetry.sampled(outcome.traceparent):
                cost = rows[-1]["cost_usd"] if result == "accepted" else 0.0
                summary.traced.append(_Traced(outcome, item.custom_id if item else "", result, cost))
        if not rows:
            return
        summary.outcomes.update(
            (
                r["state"],
                "" if r["state"] == ItemState.SUCCEEDED else error_code(r["error_code"], r["status_code"]),
            )
            for r in rows
        )
        await items.store_outcomes(conn, rows)
        await usage.insert_events(
            conn,
            [
                {
                    "created_at": now,
                    "source": UsageSource.BATCH,
                    "project_id": batch.project_id,
                    "api_key_id": batch.api_key_id,
                    "batch_id": batch_id,
                    "item_idx": r["b_idx"],
                    "model": r["model_used"],
                    "input_tokens": r["prompt_tokens"],
                    "cached_tokens": r["cached_tokens"],
                    "output_tokens": r["completion_tokens"],
                    "reasoning_tokens": r["reasoning_tokens"],
                    "cost_usd": r["cost_usd"],
                }
                for r in rows
            ],
        )
        succeeded = sum(1 for r in rows if r["state"] == ItemState.SUCCEEDED)
        added = batches.OutcomeCounts(
            completed_count=succeeded,
            failed_count=len(rows) - succeeded,
            input_tokens=sum(r["prompt_tokens"] for r in rows),
            cached_tokens=sum(r["cached_tokens"] for r in rows),
            output_tokens=sum(r["completion_tokens"] for r in rows),
            reasoning_tokens=sum(r["reasoning_tokens"] for r in rows),
            cost_usd=sum(r["cost_usd"] for r in rows),
        )
        counts = await batches.add_outcomes(conn, batch_id, added)
        summary.accepted += len(rows)
        if counts.completed_count + counts.failed_count >= batch.total:
            summary.settled.append(batch_id)

    def _row(
        self, batch_id: str, outcome: recorder_pb2.Outcome, discount: float, now: float
    ) -> dict[str, Any]:
        usage = outcome.usage
        model = outcome.model
        return {
            "b_batch": batch_id,
            "b_idx": outcome.ref.index,
            "b_attempt": outcome.ref.attempt,
            "state": ItemState.SUCCEEDED if outcome.state == SUCCEEDED else ItemState.FAILED,
            "status_code": outcome.status_code or None,
            "response": outcome.response_body if outcome.status_code else None,
            "request_id": outcome.request_id or None,
            "error_code": outcome.error_code or None,
            "error_message": outcome.error_message or None,
            "model_used": model,
            "provider": outcome.provider or None,
            "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.completion_tokens,
            "cached_tokens": usage.cached_tokens,
            "reasoning_tokens": usage.reasoning_tokens,
            "cost_usd": item_cost(
                self._settings,
                model,
                usage.prompt_tokens,
                usage.cached_tokens,
                usage.completion_tokens,
                discount,
            ),
            "attempts": outcome.attempts,
            "latency_ms": outcome.latency_ms,
            "finished_at": now,
        }


def _record_span(traced: _Traced, started_ns: int) -> None:
    """The record step in a traced item's trace, under the executor's run span."""
    outcome = traced.outcome
    telemetry.record_child_span(
        "results",
        "batchgate.item.record",
        outcome.traceparent,
        {
            **telemetry.item_attributes(outcome.ref.batch_id, outcome.ref.index, traced.custom_id),
            "batchgate.lease.attempt": outcome.ref.attempt,
            "batchgate.record.result": traced.result,
            "batchgate.outcome": ItemState.SUCCEEDED if outcome.state == SUCCEEDED else ItemState.FAILED,
            "batchgate.cost_usd": traced.cost_usd,
        },
        start_ns=started_ns,
    )
