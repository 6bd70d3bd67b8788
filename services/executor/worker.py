"""The executor's loop: lease items, run them in priority order, report outcomes as they finish.

- **Session.** Every lease belongs to this process's session at the scheduler (`executor_id`,
  new for every process), kept alive by a heartbeat every `lease_ttl_s / BEATS_PER_TTL` while
  anything is held, however many items: a `kill -9` costs its items one lease time, not more.
  When a heartbeat or a lease call hears that the session ended (this process was cut off
  for longer than a lease time, and its items were queued again), the unfinished items of
  that session are dropped (and handed back, in case any was leased again to it) and the
  executor carries on under a new session id.
- **Leasing ahead.** Up to `OUTSTANDING_FACTOR` times the calls the executor can run at once
  (`ItemRunner.concurrency`, its providers' ceilings counted: work held beyond them only waits
  here) are held, waiting, running or awaiting acknowledgement, so a finished call is followed
  at once by the next. Waiting items go by priority in the runner's dispatcher, and every
  lease call names the lowest priority waiting here (`outrank`): work that outranks it is
  leased beyond the free room, a batch's at once, and as many of the lowest waiting items are
  handed back. Full for `OUTRANK_POLL_S` (slow calls), the executor asks for such work alone,
  so an expedited batch behind a standard backlog starts at the next free slot.
- **No lease is lost to a lost answer.** Each lease call has an id; one that got no answer
  (an error, a timeout, a scheduler that died after leasing) is repeated with the same id and
  gets what it leased first, so nothing sits leased to a live session that never heard of it.
- **Stops.** The scheduler streams batches as they stop running new items (cancel, expiry);
  held items of such a batch that have not made their first call are handed back at once, and
  started ones make no further call (cancel: they end with their last answer) or are dropped
  (expiry: their results are refused anyway). Heartbeats name the held batches, so a stop the
  stream missed (a reconnect) is caught within a beat. The runner checks again right before
  each HTTP call, so none starts once the stop has arrived.
- **Outcomes go as they finish** (`outbox`), in groups; a held item keeps its lease until
  results has acknowledged its outcome, but up to one group of them (`result_batch_max`) does
  not count against leasing: against a fast upstream, finished items waiting for results'
  round trip otherwise held most slots and the calls in flight fell to half the concurrency.
- A scheduler or results that is down or restarting is retried with a short, capped backoff;
  nothing here exits. While results takes no outcome, no upstream call starts (`Outbox`).
- On shutdown, leasing stops, unstarted items are handed back, running items get
  `executor_shutdown_grace_s`, finished outcomes are sent (retried within it), the rest handed back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field

import grpc

from batchgate.internal.v1 import (
    items_pb2,
    recorder_pb2,
    recorder_pb2_grpc,
    scheduler_pb2,
    scheduler_pb2_grpc,
)
from batchgate.services.common.config import Settings
from batchgate.services.common.waits import sleep_unless
from batchgate.services.executor.held import (
    Held,
    Key,
    Stats,
    StoppedBatches,
    lowest_waiting,
    lowest_waiting_first,
    new_executor_id,
    new_request_id,
    wait_any,
)
from batchgate.services.executor.outbox import RPC_RETRY_MAX_S, RPC_RETRY_S, Outbox, Retry
from batchgate.services.executor.outcomes import NotStarted, internal_failure
from batchgate.services.executor.runner import Control, ItemRunner

log = logging.getLogger(__name__)

BEATS_PER_TTL = 5  # heartbeats per lease time: four may fail before the session lapses
OUTSTANDING_FACTOR = 3  # held items (waiting, running, awaiting acknowledgement) per unit of concurrency
OUTRANK_POLL_S = 0.1  # full this long, ask only for work that outranks what waits (a cheap call)


@dataclass
class Executor:
    settings: Settings
    scheduler: scheduler_pb2_grpc.SchedulerServiceStub
    recorder: recorder_pb2_grpc.RecorderServiceStub
    runner: ItemRunner
    executor_id: str = field(default_factory=new_executor_id)
    stats: Stats = field(default_factory=Stats)

    def __post_init__(self) -> None:
        self._held: dict[Key, Held] = {}  # every held item: waiting, running or awaiting acknowledgement
        self._stopped = StoppedBatches(stop=lambda batch_id: self._stop_batch(batch_id, hard=True))
        self._outbox = Outbox(self.settings, self._record, self._acknowledged, self.runner.dispatcher.hold)
        self._slot_freed = asyncio.Event()
        self._beat_now = asyncio.Event()
        self._stopping = asyncio.Event()
        self._stopped_running = asyncio.Event()
        self._lease_ttl_s = self.settings.lease_ttl_s  # until the scheduler says otherwise
        self._background: set[asyncio.Task[None]] = set()

    @property
    def capacity(self) -> int:
        return self.runner.concurrency

    @property
    def in_flight(self) -> int:
        """Upstream calls in flight now."""
        return self.runner.dispatcher.in_flight

    @property
    def held(self) -> int:
        """Items leased and not yet acknowledged by results (running ones included)."""
        return len(self._held)

    def _free(self) -> int:
        """Room to lease: held items count, all but one group of finished outcomes."""
        acknowledging = min(len(self._outbox.pending), self.settings.result_batch_max)
        return OUTSTANDING_FACTOR * self.capacity - len(self._held) + acknowledging

    async def run(self) -> None:
        helpers = [
            asyncio.create_task(self._outbox.run(), name="flush"),
            asyncio.create_task(self._heartbeat_loop(), name="heartbeat"),
            asyncio.create_task(self._watch_loop(), name="watch-stops"),
        ]
        try:
            await self._lease_loop()
            await self._drain()
        finally:
            for task in helpers:
                task.cancel()
            await asyncio.gather(*helpers, return_exceptions=True)
            self._stopped_running.set()

    async def shutdown(self) -> None:
        """Stop leasing, let running items finish (or hand them back), report what finished."""
        self._stopping.set()
        await self._stopped_running.wait()

    # --- leasing -----------------------------------------------------------------------------

    async def _lease_loop(self) -> None:
        retry = Retry("LeaseItems")
        request_id, unanswered = new_request_id(), False
        while not self._stopping.is_set():
            free = self._free()
            if free <= 0:
                self._slot_freed.clear()
                await wait_any(self._slot_freed, self._stopping, timeout_s=OUTRANK_POLL_S)
                if self._slot_freed.is_set() or lowest_waiting(self._held.values()) is None:
                    continue
            session = self.executor_id
            request = scheduler_pb2.LeaseItemsRequest(
                executor_id=session,
                max_items=max(0, min(free, self.settings.lease_max_items)),
                wait_ms=self.settings.lease_wait_ms if free > 0 else 0,  # full: outranking work, now
                request_id=request_id,
                retry=unanswered,
            )
            if (lowest := lowest_waiting(self._held.values())) is not None:
                request.outrank.tier, request.outrank.priority = lowest
            call = asyncio.ensure_future(
                self.scheduler.LeaseItems(request, timeout=self.settings.lease_wait_ms / 1000 + 30)
            )
            stopping = asyncio.ensure_future(self._stopping.wait())
            await asyncio.wait([call, stopping], return_when=asyncio.FIRST_COMPLETED)
            stopping.cancel()
            if not call.done():  # shutting down mid-poll; anything it leased goes with the session
                call.cancel()
                break
            try:
                answer = call.result()
            except grpc.aio.AioRpcError as exc:
                if exc.code() == grpc.StatusCode.FAILED_PRECONDITION:
                    self._session_lost(session)
                    request_id, unanswered = new_request_id(), False
                    continue
                unanswered = True  # it may have leased: ask again under the same id
                await sleep_unless(self._stopping, retry.failed(exc))
                continue
            retry.succeeded()
            request_id, unanswered = new_request_id(), False
            if answer.lease_ttl_ms:
                self._lease_ttl_s = answer.lease_ttl_ms / 1000
            self._take(answer.items, session)
            self._shed_surplus()

    def _shed_surplus(self) -> None:
        """Outranking work came in beyond what the executor holds at most: hand back as many
        of the lowest waiting items (the latest leased first)."""
        surplus = -self._free()
        if surplus <= 0:
            return
        waiting = lowest_waiting_first(self._held.values(), surplus)
        for held in waiting:
            held.task.cancel()  # type: ignore[union-attr]
            self._forget(held)
        if waiting:
            self._hand_back([h.ref for h in waiting])

    def _take(self, items: list[scheduler_pb2.LeasedItem], session: str) -> None:
        """Start the leased items, but not a batch's that stopped or passed its deadline (handed
        back, or dropped once its leases closed); a session that ended took its items back."""
        if session != self.executor_id:
            self._hand_back([item.ref for item in items])
            return
        refused: list[items_pb2.ItemRef] = []
        for item in items:
            self._stopped.watch_deadline(item.ref.batch_id, item.expires_at)
            hard = self._stopped.hard(item.ref.batch_id)
            if hard is not None:
                if not hard:
                    refused.append(item.ref)
                continue
            held = Held(ref=item.ref, session=session, priority=(item.priority_tier, item.priority))
            self._held[(item.ref.batch_id, item.ref.index)] = held
            held.task = asyncio.create_task(self._run_item(item, held))
        if refused:
            self._hand_back(refused)

    async def _run_item(self, item: scheduler_pb2.LeasedItem, held: Held) -> None:
        try:
            outcome = await self._outcome(item, held.control)
        except NotStarted:  # its batch stopped before the first call
            self._forget(held)
            self._hand_back([held.ref])
            return
        self._outbox.add(outcome)

    async def _outcome(self, item: scheduler_pb2.LeasedItem, control: Control) -> recorder_pb2.Outcome:
        try:
            return await self.runner.run(item, control)
        except (asyncio.CancelledError, NotStarted):
            raise
        except Exception as exc:  # a bug in an adapter must not lose the item: record it failed
            return internal_failure(item, exc)

    def _forget(self, held: Held) -> None:
        key = (held.ref.batch_id, held.ref.index)
        if self._held.get(key) is held:
            del self._held[key]
            self._slot_freed.set()

    def _hand_back(self, refs: list[items_pb2.ItemRef]) -> None:
        """Give unstarted items back to the scheduler (which closes them if their batch stopped);
        an unreleased lease is rescued with the session anyway."""

        async def release() -> None:
            with contextlib.suppress(grpc.aio.AioRpcError):
                await self.scheduler.ReleaseItems(
                    scheduler_pb2.ReleaseItemsRequest(executor_id=self.executor_id, items=refs), timeout=5
                )

        task = asyncio.create_task(release())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # --- stops and the session ---------------------------------------------------------------

    def _stop_batch(self, batch_id: str, hard: bool) -> None:
        """The batch starts no new item: unstarted items go back, started ones make no further
        call (`hard`: they are dropped, their leases are closed)."""
        self._stopped.note(batch_id, hard)
        unstarted: list[Held] = []
        for held in [h for (b, _i), h in self._held.items() if b == batch_id]:
            if held.task is None or held.task.done():
                continue  # its outcome is on its way to results, which decides
            if hard or held.waiting:
                held.task.cancel()
                self._forget(held)
                if hard:
                    self.stats.lost += 1
                else:
                    unstarted.append(held)
            else:
                held.control.halt()
        if unstarted:
            log.info("batch %s stopped: handing back %d unstarted items", batch_id, len(unstarted))
            self._hand_back([h.ref for h in unstarted])

    def _session_lost(self, session: str) -> None:
        """`session` ended and its leases were taken back: drop its unfinished items (their
        outcomes would be refused, or kept only if nobody ran them meanwhile) and go on under a
        new session. Finished outcomes are still sent: results decides."""
        if session != self.executor_id:
            return  # heard already
        self.executor_id = new_executor_id()
        unfinished = [
            h
            for h in self._held.values()
            if h.session == session and h.task is not None and not h.task.done()
        ]
        log.warning(
            "session %s ended (cut off from the scheduler for longer than a lease time): dropping "
            "%d unfinished items, going on as %s",
            session,
            len(unfinished),
            self.executor_id,
        )
        for held in unfinished:
            held.task.cancel()  # type: ignore[union-attr]
            self._forget(held)
        self.stats.lost += len(unfinished)

    async def _heartbeat_loop(self) -> None:
        retry = Retry("Heartbeat")
        wait = self._lease_ttl_s / BEATS_PER_TTL
        while True:
            await sleep_unless(self._beat_now, wait)
            self._beat_now.clear()
            wait = self._lease_ttl_s / BEATS_PER_TTL
            if not any(h.session == self.executor_id for h in self._held.values()):
                continue  # nothing leased under this session (it may not even exist yet)
            batch_ids = sorted({batch_id for batch_id, _index in self._held})
            session = self.executor_id
            try:
                answer = await self.scheduler.Heartbeat(
                    scheduler_pb2.HeartbeatRequest(executor_id=session, batch_ids=batch_ids),
                    timeout=self._lease_ttl_s / 2,
                )
            except grpc.aio.AioRpcError as exc:
                wait = min(retry.failed(exc), wait)  # the session runs out: try again soon
                continue
            retry.succeeded()
            if not answer.alive:
                self._session_lost(session)
            for closing in answer.closing:
                self._stop_batch(closing.batch_id, closing.hard)

    async def _watch_loop(self) -> None:
        retry = Retry("WatchClosingBatches")
        while True:
            try:
                stream = self.scheduler.WatchClosingBatches(
                    scheduler_pb2.WatchClosingBatchesRequest(executor_id=self.executor_id)
                )
                async for message in stream:
                    if message.HasField("closing"):
                        self._stop_batch(message.closing.batch_id, message.closing.hard)
                    else:  # watching: a beat catches up on stops missed while disconnected
                        retry.succeeded()
                        self._beat_now.set()
                await asyncio.sleep(RPC_RETRY_S)  # the scheduler ended the stream: watch again
            except grpc.aio.AioRpcError as exc:
                await asyncio.sleep(retry.failed(exc))

    # --- outcomes ----------------------------------------------------------------------------

    async def _record(self, group: list[recorder_pb2.Outcome]) -> recorder_pb2.RecordResultsResponse:
        request = recorder_pb2.RecordResultsRequest(executor_id=self.executor_id, outcomes=group)
        answer: recorder_pb2.RecordResultsResponse = await self.recorder.RecordResults(request, timeout=30)
        return answer

    def _acknowledged(
        self, group: list[recorder_pb2.Outcome], answer: recorder_pb2.RecordResultsResponse
    ) -> None:
        """Results has these outcomes: count them and free their items' slots."""
        self.stats.finished += answer.accepted + answer.duplicates
        self.stats.refused += len(answer.refused)
        for outcome in group:
            held = self._held.get((outcome.ref.batch_id, outcome.ref.index))
            if held is not None and held.ref.attempt == outcome.ref.attempt:
                self._forget(held)

    async def flush(self) -> bool:
        """Send every waiting outcome; returns whether none is left (on failure the rest stays
        for later)."""
        return await self._outbox.flush()

    # --- shutdown ----------------------------------------------------------------------------

    async def _drain(self) -> None:
        grace_s = self.settings.executor_shutdown_grace_s
        deadline = time.monotonic() + grace_s + RPC_RETRY_MAX_S
        unstarted = [h for h in self._held.values() if h.waiting]
        for held in unstarted:
            if held.task is not None:
                held.task.cancel()
            self._forget(held)
        if unstarted:  # at once, so another executor starts them while the running ones finish
            self._hand_back([h.ref for h in unstarted])
        running = [h.task for h in self._held.values() if h.task is not None and not h.task.done()]
        if running:
            log.info("waiting up to %gs for %d running items", grace_s, len(running))
            _done, pending = await asyncio.wait(running, timeout=grace_s)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        await self._outbox.drain(deadline)
        finished = {(o.ref.batch_id, o.ref.index) for o in self._outbox.pending}
        unfinished = [
            h.ref
            for k, h in self._held.items()
            if k not in finished and (h.task is None or h.task.cancelled())
        ]
        await asyncio.gather(*self._background, return_exceptions=True)
        if unfinished:
            with contextlib.suppress(grpc.aio.AioRpcError):
                await self.scheduler.ReleaseItems(
                    scheduler_pb2.ReleaseItemsRequest(executor_id=self.executor_id, items=unfinished),
                    timeout=5,
                )
                log.info("handed back %d unfinished items", len(unfinished))
