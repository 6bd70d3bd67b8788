"""The `batches` table's retention operations (the rest is in `db.batches`).

Only the scheduler's retention (`batchgate.services.scheduler.retention`) calls these: it purges
ended batches (`ended_unpurged`, `input_still_read`, `mark_purged`) and later forgets them
(`purged_before`, `delete_bookkeeping`).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from batchgate.services.common.db.engine import AnyRow
from batchgate.services.common.db.schema import batches
from batchgate.services.common.states import BATCH_TERMINAL


def _ended_at() -> ColumnElement[Any]:
    return func.coalesce(
        batches.c.completed_at, batches.c.failed_at, batches.c.expired_at, batches.c.cancelled_at
    )


async def ended_unpurged(
    conn: AsyncConnection, project_id: str, ended_before: float, limit: int
) -> list[AnyRow]:
    """scheduler: (id, input_file_id) of up to `limit` of the project's batches that ended
    before `ended_before` and still hold their data."""
    query = select(batches.c.id, batches.c.input_file_id).where(
        batches.c.project_id == project_id,
        batches.c.status.in_(BATCH_TERMINAL),
        batches.c.purged_at.is_(None),
        _ended_at() < ended_before,
    )
    return list((await conn.execute(query.limit(limit))).all())


async def input_still_read(conn: AsyncConnection, input_file_id: str, purging: str) -> bool:
    """scheduler: whether a batch other than `purging` that still holds its data reads the file."""
    query = select(batches.c.id).where(
        batches.c.input_file_id == input_file_id, batches.c.id != purging, batches.c.purged_at.is_(None)
    )
    return (await conn.execute(query.limit(1))).first() is not None


async def mark_purged(conn: AsyncConnection, batch_id: str, now: float) -> None:
    """scheduler: the batch's data is gone; its row stays as bookkeeping (and answers 404),
    naming the files it had."""
    await conn.execute(update(batches).where(batches.c.id == batch_id).values(purged_at=now))


async def purged_before(conn: AsyncConnection, project_id: str, ended_before: float, limit: int) -> list[str]:
    """scheduler: ids of up to `limit` of the project's purged batches that ended before `ended_before`."""
    query = select(batches.c.id).where(
        batches.c.project_id == project_id, batches.c.purged_at.is_not(None), _ended_at() < ended_before
    )
    return list((await conn.execute(query.limit(limit))).scalars().all())


async def delete_bookkeeping(conn: AsyncConnection, batch_id: str) -> None:
    """scheduler: forget a purged batch altogether (its bookkeeping period is over)."""
    await conn.execute(delete(batches).where(batches.c.id == batch_id, batches.c.purged_at.is_not(None)))
