"""The executor's loop: lease items, run them concurrently, report outcomes in groups.

- Leasing long-polls the scheduler ahead of need: up to `OUTSTANDING_FACTOR` times the
  concurrency are held (waiting to start, running, or awaiting results' acknowledgement), so
  a finished call is followed at once by the next instead of by a lease round trip. At most
  `executor_concurrency` run against their upstreams at a time; recording latency does not
  eat into that concurrency, and the cap on held items bounds memory when results is slow.
- Held items that have not started are dropped (handed back, so the scheduler closes them)
  when their batch stops running new items (cancel, expiry): a watcher asks the scheduler
  every `CLOSING_CHECK_S` while such items are held, so prefetching does not run items that a
  cancel meant to stop.
- Every held item keeps its lease until results has acknowledged its outcome: leases are
  renewed (every third of the lease time the scheduler announces) for as long as the item is
  ours, however long results is unreachable, so an outcome is never dropped while its lease
  holds, and is delivered once results answers again.
- Outcomes are sent in groups (at most `result_batch_max`, at least every `result_flush_ms`);
  a failed send is retried, and a repeat is harmless (results deduplicates by fencing token).
- A lease reported lost (it lapsed and someone else took the item, or the batch ended) cancels
  the local run and drops its outcome.
- A scheduler or results that is down or restarting is retried with a short, capped backoff
  (a failed renewal is retried at once, not a third of a lease later); nothing here exits.
- On shutdown, leasing stops, running items get a grace period, finished outcomes are sent
  (retried within the grace period), the rest are handed back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from dataclasses import dataclass, field

import grpc

from batchgate.internal.v1 import (
    items_pb2,
    recorder_pb2,
    recorder_pb2_grpc,
    scheduler_pb2,
    scheduler_pb2_grpc,
)
from services.common.config import Settings
from services.executor.runner import ItemRunner

log = logging.getLogger(__name__)

RPC_RETRY_S = 0.25
RPC_RETRY_MAX_S = 2.0
SHUTDOWN_GRACE_S = 10.0  # running items may finish this long on shutdown
FLUSH_TRIES = 8  # then unsent outcomes are retried this often (about 2 s at most)
CLOSING_CHECK_S = 0.2  # how often held-but-unstarted items' batches are checked for cancel/expiry
OUTSTANDING_FACTOR = 3  # held items (waiting, running, awaiting acknowledgement) per unit of concurrency

Key = tuple[str, int]


@dataclass
class _Slot:
    ref: items_pb2.ItemRef
    task: asyncio.Task[None] | None = None
    started: bool = False
    """Whether it has taken an upstream slot (before that it can be dropped without a trace)."""


@dataclass
class Stats:
    finished: int = 0
    refused: int = 0
    lost: int = 0


@dataclass
class _Retry:
    """Capped exponential waits between tries of one RPC, logging the first failure of a run."""

    what: str
    failures: int = 0

    @property
    def wait_s(self) -> float:
        return min(RPC_RETRY_S * 2 ** max(self.failures - 1, 0), RPC_RETRY_MAX_S)

    def failed(self, exc: grpc.aio.AioRpcError) -> float:
        self.failures += 1
        if self.failures == 1:
            log.warning("%s failed (%s); retrying", self.what, exc.code())
        return self.wait_s

    def succeeded(self) -> None:
        if self.failures:
            log.info("%s works again after %d failed tries", self.what, self.failures)
        self.failures = 0


@dataclass
class Executor:
    settings: Settings
    scheduler: scheduler_pb2_grpc.SchedulerServiceStub
    recorder: recorder_pb2_grpc.RecorderServiceStub
    runner: ItemRunner
    executor_id: str = field(default_factory=lambda: f"executor-{uuid.uuid4().hex[:12]}")
    stats: Stats = field(default_factory=Stats)

    def __post_init__(self) -> None:
        self._slots: dict[Key, _Slot] = {}  # every held item: waiting, running or awaiting acknowledgement
        self._running = 0
        self._upstream_slots = asyncio.Semaphore(self.settings.executor_concurrency)
        self._outbox: list[recorder_pb2.Outcome] = []
        self._outbox_ready = asyncio.Event()
        self._flushing = asyncio.Lock()
        self._slot_freed = asyncio.Event()
        self._stopping = asyncio.Event()
        self._stopped = asyncio.Event()
        self._lease_ttl_s = self.settings.lease_ttl_s  # until the scheduler says otherwise
        self._flush_retry = _Retry("RecordResults")

    @property
    def capacity(self) -> int:
        return self.settings.executor_concurrency

    @property
    def in_flight(self) -> int:
        """Items running against their upstream now."""
        return self._running

    @property
    def held(self) -> int:
        """Items leased and not yet acknowledged by results (running ones included)."""
        return len(self._slots)

    def _free_slots(self) -> int:
        return OUTSTANDING_FACTOR * self.capacity - len(self._slots)

    async def run(self) -> None:
        helpers = [
            asyncio.create_task(self._flush_loop(), name="flush"),
            asyncio.create_task(self._renew_loop(), name="renew"),
            asyncio.create_task(self._closing_loop(), name="closing"),
        ]
        try:
            await self._lease_loop()
            await self._drain()
        finally:
            for task in helpers:
                task.cancel()
            await asyncio.gather(*helpers, return_exceptions=True)
            self._stopped.set()

    async def shutdown(self) -> None:
        """Stop leasing, let running items finish (or hand them back), report what finished."""
        self._stopping.set()
        await self._stopped.wait()

    async def _lease_loop(self) -> None:
        retry = _Retry("LeaseItems")
        while not self._stopping.is_set():
            free = self._free_slots()
            if free <= 0:
                self._slot_freed.clear()
                await _wait_any(self._slot_freed, self._stopping)
                continue
            call = asyncio.ensure_future(
                self.scheduler.LeaseItems(
                    scheduler_pb2.LeaseItemsRequest(
                        executor_id=self.executor_id,
                        max_items=min(free, self.settings.lease_max_items),
                        wait_ms=self.settings.lease_wait_ms,
                    ),
                    timeout=self.settings.lease_wait_ms / 1000 + 30,
                )
            )
            stopping = asyncio.ensure_future(self._stopping.wait())
            await asyncio.wait([call, stopping], return_when=asyncio.FIRST_COMPLETED)
            stopping.cancel()
            if not call.done():  # shutting down mid-poll; anything it leased lapses and re-runs
                call.cancel()
                break
            try:
                answer = call.result()
            except grpc.aio.AioRpcError as exc:
                await _sleep_unless(self._stopping, retry.failed(exc))
                continue
            retry.succeeded()
            if answer.lease_ttl_ms:
                self._lease_ttl_s = answer.lease_ttl_ms / 1000
            for item in answer.items:
                slot = _Slot(ref=item.ref)
                self._slots[(item.ref.batch_id, item.ref.index)] = slot
                slot.task = asyncio.create_task(self._run_item(item, slot))

    async def _run_item(self, item: scheduler_pb2.LeasedItem, slot: _Slot) -> None:
        async with self._upstream_slots:
            slot.started = True
            self._running += 1
            try:
                outcome = await self._outcome(item)
            finally:
                self._running -= 1
        self._outbox.append(outcome)
        if len(self._outbox) >= self.settings.result_batch_max:
            self._outbox_ready.set()

    async def _outcome(self, item: scheduler_pb2.LeasedItem) -> recorder_pb2.Outcome:
        try:
            return await self.runner.run(item)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug in an adapter must not lose the item: record it failed
            log.exception(
                "running %s/%d failed",
                item.ref.batch_id,
                item.ref.index,
                extra={
                    "batch_id": item.ref.batch_id,
                    "item_index": item.ref.index,
                    "custom_id": item.custom_id,
                },
            )
            return recorder_pb2.Outcome(
                ref=item.ref,
                state=recorder_pb2.OUTCOME_STATE_FAILED,
                error_code="internal_error",
                error_message=repr(exc)[:500],
                model=item.model,
            )

    async def _flush_loop(self) -> None:
        """One group per round: a full group at once, otherwise what gathered in a flush
        interval (outcomes that finish while a group is being sent wait for the next round,
        rather than going out as a group of one or two)."""
        while True:
            if len(self._outbox) < self.settings.result_batch_max:
                await _sleep_unless(self._outbox_ready, self.settings.result_flush_ms / 1000)
            self._outbox_ready.clear()
            if self._outbox and not await self._send_group():
                await asyncio.sleep(self._flush_retry.wait_s)

    async def flush(self) -> bool:
        """Send every waiting outcome; returns whether the outbox is empty (on failure the rest
        stays for later)."""
        while self._outbox:
            if not await self._send_group():
                return False
        return True

    async def _send_group(self) -> bool:
        """Send the oldest group of outcomes. One send at a time: a group leaves the outbox
        (and frees its slots) only once results acknowledged it."""
        async with self._flushing:
            group = self._outbox[: self.settings.result_batch_max]
            if not group:
                return True
            try:
                answer = await self.recorder.RecordResults(
                    recorder_pb2.RecordResultsRequest(executor_id=self.executor_id, outcomes=group),
                    timeout=30,
                )
            except grpc.aio.AioRpcError as exc:
                self._flush_retry.failed(exc)
                return False
            self._flush_retry.succeeded()
            sent = {id(o) for o in group}  # the outbox may have changed during the call
            self._outbox = [o for o in self._outbox if id(o) not in sent]
            self.stats.finished += answer.accepted + answer.duplicates
            self.stats.refused += len(answer.refused)
            for outcome in group:
                key = (outcome.ref.batch_id, outcome.ref.index)
                slot = self._slots.get(key)
                if slot is not None and slot.ref.attempt == outcome.ref.attempt:
                    del self._slots[key]
            self._slot_freed.set()
            return True

    async def _renew_loop(self) -> None:
        retry = _Retry("RenewLeases")
        wait = self._lease_ttl_s / 3
        while True:
            await asyncio.sleep(wait)
            interval = self._lease_ttl_s / 3
            wait = interval
            refs = [slot.ref for slot in self._slots.values()]
            if not refs:
                continue
            try:
                answer = await self.scheduler.RenewLeases(
                    scheduler_pb2.RenewLeasesRequest(executor_id=self.executor_id, items=refs),
                    timeout=interval,
                )
            except grpc.aio.AioRpcError as exc:
                wait = retry.failed(exc)  # the leases run out: try again soon, not in a third
                continue
            retry.succeeded()
            for ref in answer.lost:
                self._abandon((ref.batch_id, ref.index), ref.attempt)

    async def _closing_loop(self) -> None:
        while True:
            await asyncio.sleep(CLOSING_CHECK_S)
            waiting = [s for s in self._slots.values() if not s.started]
            if not waiting:
                continue
            try:
                answer = await self.scheduler.ListClosingBatches(
                    scheduler_pb2.ListClosingBatchesRequest(batch_ids={s.ref.batch_id for s in waiting}),
                    timeout=5,
                )
            except grpc.aio.AioRpcError:
                continue  # the next round asks again; meanwhile leases and renewals go on
            closing = set(answer.batch_ids)
            dropped = [s for s in waiting if s.ref.batch_id in closing and not s.started]
            if dropped:
                await self._hand_back(dropped)

    async def _hand_back(self, slots: list[_Slot]) -> None:
        """Give unstarted items back to the scheduler (which closes them if their batch stopped)."""
        for slot in slots:
            if slot.task is not None:
                slot.task.cancel()
            self._slots.pop((slot.ref.batch_id, slot.ref.index), None)
        self._slot_freed.set()
        log.info("handing back %d unstarted items of stopped batches", len(slots))
        with contextlib.suppress(grpc.aio.AioRpcError):  # unreleased leases lapse and are rescued
            await self.scheduler.ReleaseItems(
                scheduler_pb2.ReleaseItemsRequest(executor_id=self.executor_id, items=[s.ref for s in slots]),
                timeout=5,
            )

    def _abandon(self, key: Key, attempt: int) -> None:
        slot = self._slots.get(key)
        if slot is None or slot.ref.attempt != attempt:
            return
        del self._slots[key]
        self.stats.lost += 1
        log.warning("dropping %s/%d (attempt %d): its lease is lost", key[0], key[1], attempt)
        if slot.task is not None and not slot.task.done():
            slot.task.cancel()
        self._outbox = [o for o in self._outbox if (o.ref.batch_id, o.ref.index) != key]
        self._slot_freed.set()

    async def _drain(self) -> None:
        deadline = time.monotonic() + SHUTDOWN_GRACE_S + RPC_RETRY_MAX_S
        running = [s.task for s in self._slots.values() if s.task is not None and not s.task.done()]
        if running:
            log.info("waiting up to %.0fs for %d running items", SHUTDOWN_GRACE_S, len(running))
            _done, pending = await asyncio.wait(running, timeout=SHUTDOWN_GRACE_S)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        for _ in range(FLUSH_TRIES):
            if await self.flush() or time.monotonic() > deadline:
                break
            await asyncio.sleep(self._flush_retry.wait_s)
        finished = {(o.ref.batch_id, o.ref.index) for o in self._outbox}
        unfinished = [
            s.ref
            for k, s in self._slots.items()
            if k not in finished and (s.task is None or s.task.cancelled())
        ]
        if unfinished:
            with contextlib.suppress(grpc.aio.AioRpcError):
                await self.scheduler.ReleaseItems(
                    scheduler_pb2.ReleaseItemsRequest(executor_id=self.executor_id, items=unfinished),
                    timeout=5,
                )
                log.info("handed back %d unfinished items", len(unfinished))


async def _wait_any(*events: asyncio.Event) -> None:
    waiters = [asyncio.create_task(e.wait()) for e in events]
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()


async def _sleep_unless(event: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(event.wait(), seconds)
