"""A lease call hands out at most the items asked for, on SQLite and on PostgreSQL.

PostgreSQL may plan `idx IN (SELECT … LIMIT n FOR UPDATE SKIP LOCKED)` as a nested loop that
re-runs the locking sub-select for every row, which leased a whole batch to one executor.
"""

from __future__ import annotations

import asyncio

from sqlalchemy import select

from batchgate.services.common.db import Database
from batchgate.services.common.db.schema import items
from batchgate.services.scheduler.queue import Queue
from tests.integration.seed import add_batch
from tests.support import prepare_database


async def _lease_twice(url: str) -> tuple[int, int, int]:
    await prepare_database(url)
    db = Database(url)
    try:
        await add_batch(db, "batch_limit", 40)
        queue = Queue(db, lease_ttl_s=60)
        first = await queue.lease("executor-a", 4)
        second = await queue.lease("executor-b", 7)
        async with db.read() as conn:
            leased = len((await conn.execute(select(items.c.idx).where(items.c.state == "leased"))).all())
        assert not {lease.index for lease in first} & {lease.index for lease in second}
        return len(first), len(second), leased
    finally:
        await db.dispose()


def test_lease_takes_no_more_than_asked(database_url: str) -> None:
    assert asyncio.run(_lease_twice(database_url)) == (4, 7, 11)
