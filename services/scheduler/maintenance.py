"""The scheduler's periodic work, run by one replica at a time (the leader): rescue the items
of executor sessions that lapsed, stop the batches of revoked or expired API keys, close the
open items of cancelling and expired batches (telling executors of an expiry), ask results
to finalize batches that have nothing open any more, follow the batches passed through to a
provider's batch API (`native_batches`), and purge what is past its retention (`retention`).

Every step is safe to run twice at once (conditional updates that re-check the row), so the
leader lock is about not doing the work N times, not about correctness: a leader that lost
its lock without noticing yet does no harm.

A new leader (a restarted scheduler, or a replica taking over) waits a lease time before its
first rescue: sessions may have lapsed while nobody could take their heartbeats (the scheduler
was down), and their executors, still working, beat again within a fraction of the lease time
once they can reach a scheduler. Rescuing first would re-run items that are running or done.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from batchgate.services.common.db import Database
from batchgate.services.common.db.dialect import LeaderLock
from batchgate.services.common.states import BatchStatus
from batchgate.services.scheduler.closing_feed import ClosingFeed
from batchgate.services.scheduler.metrics import DEPTH_INTERVAL_S, SchedulerMetrics
from batchgate.services.scheduler.native_batches import NativeBatches
from batchgate.services.scheduler.queue import Closing, Queue, Stopped
from batchgate.services.scheduler.retention import Retention

log = logging.getLogger(__name__)

LEADER_LOCK_KEY = 0x62617463  # "batc": the scheduler's maintenance advisory lock


class Maintenance:
    def __init__(
        self,
        db: Database,
        queue: Queue,
        interval_s: float,
        wake: Callable[[], None],
        finalize: Callable[[str], Awaitable[None]],
        feed: ClosingFeed,
        metrics: SchedulerMetrics | None = None,
        native: NativeBatches | None = None,
        retention: Retention | None = None,
    ) -> None:
        self._native = native
        self._queue = queue
        self._feed = feed
        self._retention = retention
        self._metrics = metrics or SchedulerMetrics()
        self._depth_at = 0.0
        self._interval_s = interval_s
        self._wake = wake
        self._finalize = finalize
        self._leader = LeaderLock(db, LEADER_LOCK_KEY, interval_s)
        self._leading_since: float | None = None
        self.rescue_grace_s = queue.lease_ttl_s
        self._closing: set[asyncio.Task[None]] = set()

    async def close_batch(self, closing: Closing) -> None:
        """Close what is open in a cancelling/expired batch; finalize it if nothing is left."""
        closed, settled = await self._queue.close_open(closing)
        if closed:
            log.info("batch %s: %d open items %s", closing.batch_id, closed, closing.end)
            if closing.hard:  # its running items' results are refused now: executors stop them
                await self._feed.announce(Stopped(closing.batch_id, hard=True))
        if settled:
            await self._finalize(closing.batch_id)

    def close_soon(self, closing: Closing) -> None:
        """Close a batch in the background, for a cancel that answers at once: closing the
        queued items of a large batch is one long update (tens of seconds for a million items),
        longer than a client waits for an answer. A close that fails or is cut short (the
        process stopped) leaves the batch `cancelling`, and the leader's next tick closes it."""
        task = asyncio.create_task(self.close_batch(closing))
        self._closing.add(task)
        task.add_done_callback(self._closed)

    def _closed(self, task: asyncio.Task[None]) -> None:
        self._closing.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.warning("closing a batch failed (%r); the maintenance tick closes it", exc)

    async def stop_revoked(self) -> None:
        """Stop the batches of keys revoked or expired since: what is queued or running ends
        `credential_revoked` (running items are stopped, their late results refused), what
        finished stays, and the batch ends `cancelled`."""
        for batch_id in await self._queue.revoked_batches():
            await self._queue.cancel_revoked(batch_id)
            log.warning("batch %s: its API key was revoked or expired; stopping it", batch_id)
            await self.close_batch(Closing(batch_id, BatchStatus.CANCELLED, hard=True, revoked=True))

    async def tick(self) -> None:
        assert self._leading_since is not None
        if time.monotonic() - self._leading_since >= self.rescue_grace_s:
            rescued = await self._queue.rescue_expired()
            if rescued:
                log.warning("re-queued %d items of executors that stopped beating", rescued)
                self._metrics.leases_rescued.add(rescued)
                self._wake()
        await self.stop_revoked()
        for closing in await self._queue.closing_batches():
            await self.close_batch(closing)
        if self._native is not None:
            await self._native.tick()
        if self._retention is not None:
            await self._retention.due()
        if self._metrics.enabled and time.monotonic() - self._depth_at >= DEPTH_INTERVAL_S:
            self._depth_at = time.monotonic()
            self._metrics.set_depth(await self._queue.depth())

    async def _lead(self) -> bool:
        if not await self._leader.held():
            if self._leading_since is not None:
                log.warning("no longer the maintenance leader")
                self._metrics.set_depth({})  # the new leader reports it
            self._leading_since = None
            return False
        if self._leading_since is None:
            log.info("maintenance leader; first rescue in %.1fs", self.rescue_grace_s)
            self._leading_since = time.monotonic()
        return True

    async def run(self) -> None:
        try:
            while True:
                try:
                    if await self._lead():
                        await self.tick()
                except Exception:
                    log.exception("scheduler maintenance failed")
                await asyncio.sleep(self._interval_s)
        finally:
            await self._leader.release()
