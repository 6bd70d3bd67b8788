"""Fresh planner statistics once a large batch arrives (PostgreSQL).

A batch of tens of thousands of items can outnumber everything the `items` table held when
PostgreSQL last sampled it: its planner then costs the hot statements (lease, the recorder's
item locks) as if the batch were not there, and the generic plans it caches for them read
the whole batch on every call, so leasing and recording a batch cost O(n²) and a 1,000,000-
item batch crawled at ~80 items/s. After a batch of `LARGE_BATCH_ITEMS` or more is
submitted, the scheduler has the table analyzed in the background (one at a time per
process): ANALYZE samples a fixed number of rows, about a tenth of a second whatever the
table's size, and invalidates the cached plans in every session.
"""

from __future__ import annotations

import asyncio
import logging

from batchgate.services.common.db import Database, items

log = logging.getLogger(__name__)

LARGE_BATCH_ITEMS = 10_000


class Statistics:
    def __init__(self, db: Database) -> None:
        self._db = db
        self._running: asyncio.Task[None] | None = None

    def batch_submitted(self, total: int) -> asyncio.Task[None] | None:
        """Refresh the statistics when a batch of `total` items is large enough to skew them;
        returns the refresh it started (None: not needed, or one is running already)."""
        if not self._db.is_postgres or total < LARGE_BATCH_ITEMS:
            return None
        if self._running is not None and not self._running.done():
            return None
        self._running = asyncio.create_task(self._refresh())
        return self._running

    async def _refresh(self) -> None:
        try:
            await items.refresh_statistics(self._db)
        except Exception:  # the plans stay as they are until autovacuum analyzes
            log.warning("ANALYZE items failed", exc_info=True)
