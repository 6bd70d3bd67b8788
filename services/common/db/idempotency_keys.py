"""The `idempotency_keys` table (Idempotency-Key → batch, per project): the only place its SQL
lives. Ingest alone calls these (`batchgate.services.ingest.idempotency` holds the rules).

A claim is a row whose `batch_id` is null; the create binds it to its batch in the
transaction that publishes the batch, or releases it when it fails.
"""

from __future__ import annotations

from sqlalchemy import ColumnElement, delete, insert, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from batchgate.services.common.db.dialect import lock_rows
from batchgate.services.common.db.engine import AnyRow, Database
from batchgate.services.common.db.schema import idempotency_keys

keys = idempotency_keys.c


def _unbound(project_id: str, key: str) -> tuple[ColumnElement[bool], ...]:
    return (keys.project_id == project_id, keys.key == key, keys.batch_id.is_(None))


async def lock(db: Database, conn: AsyncConnection, project_id: str, key: str) -> AnyRow | None:
    """ingest: the key's row, locked (PostgreSQL) until the transaction ends."""
    query = select(idempotency_keys).where(keys.project_id == project_id, keys.key == key)
    row: AnyRow | None = (await conn.execute(lock_rows(db, query))).first()
    return row


async def claim(
    conn: AsyncConnection, *, project_id: str, key: str, request_hash: str, now: float, replace: bool
) -> None:
    """ingest: claim the key for a create (`replace`: over a lapsed row). A concurrent claim of
    the same key makes this raise `IntegrityError`."""
    if replace:
        await conn.execute(delete(idempotency_keys).where(keys.project_id == project_id, keys.key == key))
    await conn.execute(
        insert(idempotency_keys).values(
            project_id=project_id, key=key, request_hash=request_hash, batch_id=None, created_at=now
        )
    )


async def bind(conn: AsyncConnection, project_id: str, key: str, batch_id: str) -> None:
    """ingest: point a claimed key at its batch, in the transaction that publishes the batch."""
    await conn.execute(update(idempotency_keys).where(*_unbound(project_id, key)).values(batch_id=batch_id))


async def release(conn: AsyncConnection, project_id: str, key: str) -> None:
    """ingest: free the key of a create that failed (no-op once it is bound to a batch)."""
    await conn.execute(delete(idempotency_keys).where(*_unbound(project_id, key)))


async def sweep(conn: AsyncConnection, *, expired_before: float, stale_before: float) -> int:
    """ingest: delete keys created before `expired_before`, and claims (unbound) created before
    `stale_before` (their create crashed); how many went."""
    result = await conn.execute(
        delete(idempotency_keys).where(
            or_(
                keys.created_at <= expired_before,
                keys.batch_id.is_(None) & (keys.created_at <= stale_before),
            )
        )
    )
    return int(result.rowcount or 0)
