"""A large batch gets PostgreSQL's statistics of `items` refreshed (`scheduler.statistics`),
so that the plans of the lease and record statements see its items; small batches and SQLite
cost nothing."""

from __future__ import annotations

from sqlalchemy import text

from batchgate.services.common.db import Database
from batchgate.services.scheduler.statistics import LARGE_BATCH_ITEMS, Statistics
from tests.integration.seed import add_batch


async def _reltuples(db: Database) -> float:
    """pg_class's row estimate of `items`: -1 until the table was first analyzed."""
    async with db.read() as conn:
        found = await conn.execute(text("SELECT reltuples FROM pg_class WHERE relname = 'items'"))
        return float(found.scalar_one())


async def test_a_large_batch_has_the_items_table_analyzed_once_at_a_time(db: Database) -> None:
    await add_batch(db, "b_big", 50)
    statistics = Statistics(db)
    assert statistics.batch_submitted(LARGE_BATCH_ITEMS - 1) is None
    if not db.is_postgres:
        assert statistics.batch_submitted(LARGE_BATCH_ITEMS) is None
        return
    # Read before the refresh starts: once it runs, it may finish before any read here.
    assert await _reltuples(db) == -1  # never analyzed: the planner guesses
    refresh = statistics.batch_submitted(LARGE_BATCH_ITEMS)
    assert refresh is not None
    assert statistics.batch_submitted(LARGE_BATCH_ITEMS) is None  # one refresh at a time
    await refresh
    assert await _reltuples(db) == 50
    again = statistics.batch_submitted(LARGE_BATCH_ITEMS)  # the next large batch
    assert again is not None
    await again
