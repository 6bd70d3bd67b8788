"""The `rate_budgets` table (per provider key, the deployment's token buckets): the only place
its SQL lives. The scheduler alone calls these (`batchgate.services.scheduler.budgets` holds the rules).
"""

from __future__ import annotations

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from batchgate.services.common.db.dialect import lock_rows, upsert
from batchgate.services.common.db.engine import AnyRow, Database
from batchgate.services.common.db.schema import rate_budgets


async def lock_bucket(
    db: Database,
    conn: AsyncConnection,
    *,
    key_id: str,
    requests_per_minute: float,
    tokens_per_minute: float,
    now: float,
) -> AnyRow:
    """scheduler: the key's buckets, created full if new, locked until the transaction ends."""
    await conn.execute(
        upsert(
            db,
            rate_budgets,
            {
                "key_id": key_id,
                "requests_per_minute": requests_per_minute,
                "tokens_per_minute": tokens_per_minute,
                "requests": requests_per_minute,
                "tokens": tokens_per_minute,
                "updated_at": now,
            },
            keys=("key_id",),
        )
    )
    query = select(rate_budgets).where(rate_budgets.c.key_id == key_id)
    row: AnyRow = (await conn.execute(lock_rows(db, query))).one()
    return row


async def store_bucket(
    conn: AsyncConnection,
    *,
    key_id: str,
    requests_per_minute: float,
    tokens_per_minute: float,
    requests: float,
    tokens: float,
    now: float,
) -> None:
    """scheduler: the key's rates and bucket levels as of `now`."""
    await conn.execute(
        update(rate_budgets)
        .where(rate_budgets.c.key_id == key_id)
        .values(
            requests_per_minute=requests_per_minute,
            tokens_per_minute=tokens_per_minute,
            requests=requests,
            tokens=tokens,
            updated_at=now,
        )
    )
