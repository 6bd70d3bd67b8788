"""The `native_batches` table (the provider batches a natively run batch was sent as) and the
leases of those batches' items: the only place this SQL lives. The scheduler alone calls these
(`batchgate.services.scheduler.native_batches` holds the rules).

A native batch's items are leased, all at once when its provider batches are planned, to the
holder `NATIVE_HOLDER`, which has no executor session: no rescue ever queues them again, and
executors never see them (leasing skips `execution = 'native'` batches). The lease's attempt
is the fencing token the scheduler's RecordResults calls carry, exactly as an executor's would.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import exists, func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from batchgate.services.common.db.dialect import lock_rows
from batchgate.services.common.db.engine import AnyRow, Database
from batchgate.services.common.db.schema import batches, items, native_batches
from batchgate.services.common.states import BATCH_RUNNING, BatchStatus, Execution, ItemState

NATIVE_HOLDER = "native"  # `items.leased_by` of an item a provider's batch API runs


@dataclass(frozen=True, kw_only=True)
class Part:
    """One provider batch to create: the items `first_idx <= idx < end_idx`."""

    token: str
    part: int
    first_idx: int
    end_idx: int


async def unplanned(conn: AsyncConnection) -> list[AnyRow]:
    """scheduler: (id, model, endpoint) of natively run batches that are running and have no
    provider batch planned yet."""
    planned = exists().where(native_batches.c.batch_id == batches.c.id)
    query = select(batches.c.id, batches.c.model, batches.c.endpoint).where(
        batches.c.execution == Execution.NATIVE, batches.c.status.in_(BATCH_RUNNING), ~planned
    )
    return list((await conn.execute(query)).all())


async def plan(
    db: Database,
    conn: AsyncConnection,
    *,
    batch_id: str,
    provider: str,
    limit: int,
    new_token: Any,
    poll_interval_s: float,
    now: float,
) -> list[Part]:
    """scheduler: lease the batch's queued items to `NATIVE_HOLDER` and record the provider
    batches they go in (`limit` items each, in input order), in one transaction; nothing when
    another replica planned it first. `new_token()` names each part."""
    locked = await conn.execute(lock_rows(db, select(batches.c.id).where(batches.c.id == batch_id)))
    if (
        locked.first() is None
        or (
            await conn.execute(select(native_batches.c.token).where(native_batches.c.batch_id == batch_id))
        ).first()
    ):
        return []
    leased = (
        await conn.execute(
            update(items)
            .where(items.c.batch_id == batch_id, items.c.state == ItemState.QUEUED)
            .values(state=ItemState.LEASED, attempt=items.c.attempt + 1, leased_by=NATIVE_HOLDER)
            .returning(items.c.idx)
        )
    ).scalars()
    indexes = sorted(leased)
    parts = [
        Part(token=new_token(), part=n, first_idx=indexes[start], end_idx=indexes[end - 1] + 1)
        for n, (start, end) in enumerate(
            (s, min(s + limit, len(indexes))) for s in range(0, len(indexes), limit)
        )
    ]
    if parts:
        await conn.execute(
            insert(native_batches),
            [
                {
                    "token": p.token,
                    "batch_id": batch_id,
                    "part": p.part,
                    "first_idx": p.first_idx,
                    "end_idx": p.end_idx,
                    "provider": provider,
                    "poll_interval_s": poll_interval_s,
                    "next_poll_at": now,
                    "created_at": now,
                }
                for p in parts
            ],
        )
    return parts


async def due(conn: AsyncConnection, now: float) -> list[AnyRow]:
    """scheduler: the provider batches to act on now (not yet imported, and due: to be created
    or polled, or a cancel to forward), with their batch's status, model and endpoint."""
    query = (
        select(native_batches, batches.c.status, batches.c.model, batches.c.endpoint)
        .join(batches, batches.c.id == native_batches.c.batch_id)
        .where(
            ~native_batches.c.imported,
            (native_batches.c.next_poll_at <= now)
            | (
                (batches.c.status == BatchStatus.CANCELLING)
                & ~native_batches.c.cancel_sent
                & native_batches.c.provider_batch_id.is_not(None)
            ),
        )
        .order_by(native_batches.c.batch_id, native_batches.c.part)
    )
    return list((await conn.execute(query)).all())


async def records(conn: AsyncConnection, batch_id: str, first_idx: int, end_idx: int) -> list[AnyRow]:
    """scheduler: (idx, attempt, body) of the part's items a provider runs, in input order."""
    query = (
        select(items.c.idx, items.c.attempt, items.c.body)
        .where(
            items.c.batch_id == batch_id,
            items.c.idx >= first_idx,
            items.c.idx < end_idx,
            items.c.state == ItemState.LEASED,
            items.c.leased_by == NATIVE_HOLDER,
        )
        .order_by(items.c.idx)
    )
    return list((await conn.execute(query)).all())


async def update_part(conn: AsyncConnection, token: str, **values: Any) -> None:
    """scheduler: store what is now known of a provider batch (its ids as soon as the provider
    answers, its status and counts, the next poll, `cancel_sent`, `imported`, `error`), and
    its batch's live progress: the provider's counts of the parts not imported yet."""
    await conn.execute(update(native_batches).where(native_batches.c.token == token).values(**values))
    batch_id = select(native_batches.c.batch_id).where(native_batches.c.token == token).scalar_subquery()
    pending = ~native_batches.c.imported & (native_batches.c.batch_id == batches.c.id)

    def pending_sum(column: Any) -> Any:
        return select(func.coalesce(func.sum(column), 0)).where(pending).scalar_subquery()

    await conn.execute(
        update(batches)
        .where(batches.c.id == batch_id)
        .values(
            native_completed=pending_sum(native_batches.c.completed),
            native_failed=pending_sum(native_batches.c.failed),
        )
    )


async def is_known(conn: AsyncConnection, provider: str, provider_batch_id: str) -> bool:
    """scheduler: whether some part already follows this provider batch."""
    query = select(native_batches.c.token).where(
        native_batches.c.provider == provider, native_batches.c.provider_batch_id == provider_batch_id
    )
    return (await conn.execute(query)).first() is not None


async def parts_left(conn: AsyncConnection, batch_id: str) -> int:
    """scheduler: the batch's provider batches whose results are not imported yet."""
    query = select(func.count()).where(native_batches.c.batch_id == batch_id, ~native_batches.c.imported)
    return int((await conn.execute(query)).scalar_one())


async def errors_of(conn: AsyncConnection, batch_id: str) -> list[str]:
    """scheduler: the errors of the batch's provider batches that failed outright."""
    query = (
        select(native_batches.c.error)
        .where(native_batches.c.batch_id == batch_id, native_batches.c.error.is_not(None))
        .order_by(native_batches.c.part)
    )
    return [str(e) for e in (await conn.execute(query)).scalars()]


async def set_batch_errors(conn: AsyncConnection, batch_id: str, errors_json: str) -> None:
    """scheduler: the batch's `errors` (the provider's, when its batch failed outright)."""
    await conn.execute(update(batches).where(batches.c.id == batch_id).values(errors=errors_json))


async def of_batch(conn: AsyncConnection, batch_ids: Sequence[str]) -> list[AnyRow]:
    """scheduler, tests: the provider batches of `batch_ids`, in part order."""
    query = (
        select(native_batches)
        .where(native_batches.c.batch_id.in_(batch_ids))
        .order_by(native_batches.c.batch_id, native_batches.c.part)
    )
    return list((await conn.execute(query)).all())
