"""SchedulerService: leases, sessions, stop notices and rate budgets for executors; submit and
cancel for ingest."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
import time
from collections import Counter
from collections.abc import AsyncIterator

import grpc
import orjson

from batchgate.internal.v1 import items_pb2, scheduler_pb2, scheduler_pb2_grpc
from batchgate.services.common import errors, telemetry
from batchgate.services.common.api_shapes import requested_model
from batchgate.services.common.config import Settings
from batchgate.services.common.db import Database, batches
from batchgate.services.common.db.dialect import notify
from batchgate.services.common.faults import crash_point
from batchgate.services.common.message_budget import ENTRY_OVERHEAD, fitting, message_budget
from batchgate.services.common.states import BatchStatus
from batchgate.services.common.waits import sleep_unless
from batchgate.services.scheduler.budgets import Ask, Budgets
from batchgate.services.scheduler.closing_feed import ClosingFeed
from batchgate.services.scheduler.maintenance import Maintenance
from batchgate.services.scheduler.metrics import SchedulerMetrics, tier_name
from batchgate.services.scheduler.queue import Closing, Lease, Queue, Ref, Request, SessionLost, Stopped
from batchgate.services.scheduler.statistics import Statistics
from batchgate.services.scheduler.work_signal import WORK_CHANNEL, WorkSignal

log = logging.getLogger(__name__)

POLL_BACKSTOP_S = 1.0  # an idle long-poll looks at the queue at least this often


def _ref(message: items_pb2.ItemRef) -> Ref:
    return Ref(message.batch_id, message.index, message.attempt)


def _leased_item(lease: Lease, traceparent: str | None) -> scheduler_pb2.LeasedItem:
    return scheduler_pb2.LeasedItem(
        ref=items_pb2.ItemRef(batch_id=lease.batch_id, index=lease.index, attempt=lease.attempt),
        custom_id=lease.custom_id,
        endpoint=lease.endpoint,
        model=requested_model(lease.endpoint, lease.body, lease.model),
        body=lease.body,
        traceparent=traceparent or "",
        project_id=lease.project_id,
        priority_tier=lease.tier,
        priority=lease.priority,
        expires_at=lease.expires_at,
        models_bounded=lease.allowed_models is not None,
        allowed_models=orjson.loads(lease.allowed_models) if lease.allowed_models is not None else (),
    )


def _lease_bytes(lease: Lease) -> int:
    return len(lease.body) + len(lease.custom_id) + ENTRY_OVERHEAD


def _closing(stopped: Stopped) -> scheduler_pb2.ClosingBatch:
    return scheduler_pb2.ClosingBatch(batch_id=stopped.batch_id, hard=stopped.hard)


class SchedulerServicer(scheduler_pb2_grpc.SchedulerServiceServicer):
    def __init__(
        self,
        settings: Settings,
        db: Database,
        queue: Queue,
        signal: WorkSignal,
        maintenance: Maintenance,
        feed: ClosingFeed,
        budgets: Budgets,
        metrics: SchedulerMetrics | None = None,
    ) -> None:
        self._metrics = metrics or SchedulerMetrics()
        self._settings = settings
        self._db = db
        self._queue = queue
        self._signal = signal
        self._maintenance = maintenance
        self._feed = feed
        self._budgets = budgets
        self._statistics = Statistics(db)

    async def SubmitBatch(
        self, request: scheduler_pb2.SubmitBatchRequest, context: grpc.aio.ServicerContext
    ) -> scheduler_pb2.SubmitBatchResponse:
        self._signal.wake()
        if self._db.is_postgres:
            async with self._db.write() as conn:
                await notify(self._db, conn, WORK_CHANNEL, request.batch_id)
                total = await batches.total_of(conn, request.batch_id)
            self._statistics.batch_submitted(total)
        return scheduler_pb2.SubmitBatchResponse()

    async def LeaseItems(
        self, request: scheduler_pb2.LeaseItemsRequest, context: grpc.aio.ServicerContext
    ) -> scheduler_pb2.LeaseItemsResponse:
        max_items = max(0, min(request.max_items, self._settings.lease_max_items))
        deadline = time.monotonic() + min(request.wait_ms, self._settings.lease_wait_ms) / 1000
        outrank = (request.outrank.tier, request.outrank.priority) if request.HasField("outrank") else None
        asked = Request(request.request_id, request.retry, outrank, self._settings.lease_max_items)
        leases: list[Lease] = []
        started_ns = time.time_ns()
        while max_items or outrank is not None:
            event = self._signal.current()
            started_ns = time.time_ns()
            try:
                leases = await self._queue.lease(request.executor_id, max_items, asked)
                asked = dataclasses.replace(asked, retry=False)  # what it lost came back: lease anew
            except SessionLost:
                await context.abort(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    f"session {request.executor_id} lapsed and its leases were taken back; open a new one",
                )
            if leases:
                crash_point("scheduler.lease.after_commit")  # leased, but the executor never hears
                leases = await self._within_message(leases)
            remaining = deadline - time.monotonic()
            if leases or remaining <= 0 or context.done():
                break
            await sleep_unless(event, min(remaining, POLL_BACKSTOP_S))
        traceparents = self._observe(leases, request.executor_id, started_ns)
        return scheduler_pb2.LeaseItemsResponse(
            items=[_leased_item(lease, tp) for lease, tp in zip(leases, traceparents, strict=True)],
            lease_ttl_ms=int(self._settings.lease_ttl_s * 1000),
        )

    async def _within_message(self, leases: list[Lease]) -> list[Lease]:
        """The leases one answer can carry (`message_budget`); the rest are queued again at once,
        first in line for the next lease."""
        kept = fitting(leases, _lease_bytes, message_budget(self._settings))
        if kept < len(leases):
            await self._queue.release(
                [Ref(lease.batch_id, lease.index, lease.attempt) for lease in leases[kept:]]
            )
        return leases[:kept]

    def _observe(self, leases: list[Lease], executor_id: str, started_ns: int) -> list[str | None]:
        """Count the leases and record each in its item's trace, when traced; returns the
        traceparents the executor continues the items' traces from (the lease spans', or what
        was stored)."""
        for tier, count in Counter(tier_name(lease.tier) for lease in leases).items():
            self._metrics.items_leased.add(count, {"priority": tier})
        waited = {lease.batch_id: lease for lease in leases}  # one observation per batch and call
        for lease in waited.values():
            wait_s = max(started_ns / 1e9 - lease.batch_created_at, 0.0)
            self._metrics.lease_wait.record(wait_s, {"priority": tier_name(lease.tier)})
        traceparents = []
        for lease in leases:
            if not telemetry.traced("scheduler", lease.traceparent):
                traceparents.append(lease.traceparent)
                continue
            span = telemetry.record_child_span(
                "scheduler",
                "batchgate.item.lease",
                lease.traceparent,
                {
                    **telemetry.item_attributes(lease.batch_id, lease.index, lease.custom_id),
                    "batchgate.lease.attempt": lease.attempt,
                    "batchgate.lease.wait_s": round(max(started_ns / 1e9 - lease.batch_created_at, 0.0), 3),
                    "batchgate.executor.id": executor_id,
                    "batchgate.priority": tier_name(lease.tier),
                },
                start_ns=started_ns,
            )
            traceparents.append(span)
        return traceparents

    async def Heartbeat(
        self, request: scheduler_pb2.HeartbeatRequest, context: grpc.aio.ServicerContext
    ) -> scheduler_pb2.HeartbeatResponse:
        alive = await self._queue.heartbeat(request.executor_id)
        stopped = await self._queue.stopped(list(dict.fromkeys(request.batch_ids)))
        return scheduler_pb2.HeartbeatResponse(alive=alive, closing=[_closing(s) for s in stopped])

    async def ReleaseItems(
        self, request: scheduler_pb2.ReleaseItemsRequest, context: grpc.aio.ServicerContext
    ) -> scheduler_pb2.ReleaseItemsResponse:
        released = await self._queue.release([_ref(m) for m in request.items])
        if released:
            self._signal.wake()
        return scheduler_pb2.ReleaseItemsResponse(released=released)

    async def WatchClosingBatches(
        self, request: scheduler_pb2.WatchClosingBatchesRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[scheduler_pb2.WatchClosingBatchesResponse]:
        async for stopped in self._feed.watch():
            if stopped is None:
                yield scheduler_pb2.WatchClosingBatchesResponse()
            else:
                yield scheduler_pb2.WatchClosingBatchesResponse(closing=_closing(stopped))

    async def GrantBudget(
        self, request: scheduler_pb2.GrantBudgetRequest, context: grpc.aio.ServicerContext
    ) -> scheduler_pb2.GrantBudgetResponse:
        asks = [
            Ask(
                a.key_id,
                a.requests_per_minute,
                a.tokens_per_minute,
                a.requests_needed,
                a.requests_wanted,
                a.tokens_needed,
                a.tokens_wanted,
            )
            for a in request.asks
        ]
        grants = await self._budgets.grant(asks)
        return scheduler_pb2.GrantBudgetResponse(
            grants=[
                scheduler_pb2.BudgetGrant(
                    key_id=g.key_id,
                    requests=g.requests,
                    tokens=g.tokens,
                    retry_after_ms=math.ceil(g.retry_after_s * 1000),
                )
                for g in grants
            ]
        )

    async def CancelBatch(
        self, request: scheduler_pb2.CancelBatchRequest, context: grpc.aio.ServicerContext
    ) -> scheduler_pb2.CancelBatchResponse:
        async with self._db.write() as conn:
            # A batch that already expired (its open items closed, finalize pending) stays expired.
            moved = await batches.request_cancel(conn, request.batch_id)
        if moved:
            log.info("batch %s: cancelling", request.batch_id)
            # Executors drop what they hold of it and have not started; then what is queued
            # is closed now rather than at the next tick, after the answer: the batch is
            # `cancelling` from here on whatever its size. Running items finish and are kept.
            await asyncio.shield(self._feed.announce(Stopped(request.batch_id, hard=False)))
            self._maintenance.close_soon(Closing(request.batch_id, BatchStatus.CANCELLED, hard=False))
        status = await self._status(request.batch_id)
        return scheduler_pb2.CancelBatchResponse(status=status)

    async def _status(self, batch_id: str) -> str:
        async with self._db.read() as conn:
            status = await batches.status_of(conn, batch_id)
        if status is None:
            raise errors.not_found("batch", batch_id)
        return status
