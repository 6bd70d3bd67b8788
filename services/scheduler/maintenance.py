"""The scheduler's periodic work, run by one replica at a time (the leader):
rescue lapsed leases, close the queued items of cancelling and expired batches, and ask
results to finalize batches that have nothing open any more."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from services.common.db import Database
from services.common.db.dialect import LeaderLock
from services.scheduler.queue import Queue

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
    ) -> None:
        self._queue = queue
        self._interval_s = interval_s
        self._wake = wake
        self._finalize = finalize
        self._leader = LeaderLock(db, LEADER_LOCK_KEY)

    async def close_batch(self, batch_id: str, end: str) -> None:
        """Close what is queued in a cancelling/expired batch; finalize it if nothing is open."""
        closed, settled = await self._queue.close_queued(batch_id, end)
        if closed:
            log.info("batch %s: %d queued items %s", batch_id, closed, end)
        if settled:
            await self._finalize(batch_id)

    async def tick(self) -> None:
        rescued = await self._queue.rescue_expired()
        if rescued:
            log.warning("re-queued %d items whose lease lapsed", rescued)
            self._wake()
        for batch_id, end in await self._queue.closing_batches():
            await self.close_batch(batch_id, end)

    async def run(self) -> None:
        try:
            while True:
                try:
                    if await self._leader.held():
                        await self.tick()
                except Exception:
                    log.exception("scheduler maintenance failed")
                await asyncio.sleep(self._interval_s)
        finally:
            await self._leader.release()
