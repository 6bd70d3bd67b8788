"""The queue's statements (one aggregate: `items` leases, `executor_sessions`, and the reads of
running batches they depend on): the only place this SQL lives. The scheduler alone calls
these; `batchgate.services.scheduler.queue` holds the rules (fairness, rounds, sessions' lifetimes).

Leasing is one UPDATE … WHERE idx IN (SELECT … LIMIT n [FOR UPDATE SKIP LOCKED]) RETURNING
per batch that gets a share, walking the partial index on queued items from the batch's lease
cursor up (`lease_cursors`); on PostgreSQL the sub-select is written so that it runs exactly
once, `dialect.in_skip_locked`, and the rows are found by key, `_build_lease`. Concurrent
leasers on several replicas skip each other's rows instead of waiting, and a row updated
meanwhile is re-checked (`state='queued'`) before it is taken. Every lease bumps `attempt`,
the fencing token a result must carry to be accepted. The same statement re-checks that the
batch still runs, so a batch cancelled or expired after the candidates were read hands out
nothing more.

Lock order on PostgreSQL, wherever one transaction touches both: the batch row, then its
items (results' recorder does the same), so closing and recording cannot deadlock; a session
row before items (leasing and rescue), so those two cannot either. (A lease locks its batch
row after its items SKIP LOCKED: it never waits there.)
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import bindparam, exists, func, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from batchgate.services.common.db import lease_cursors
from batchgate.services.common.db.dialect import PerDialect, in_skip_locked, lock_rows, upsert
from batchgate.services.common.db.engine import AnyRow, Database
from batchgate.services.common.db.schema import batches, executor_sessions, items
from batchgate.services.common.states import BATCH_RUNNING, ITEM_OPEN, BatchStatus, Execution, ItemState


@dataclass(frozen=True)
class Ref:
    """One lease of one item: the attempt is its fencing token."""

    batch_id: str
    index: int
    attempt: int


# One lease, matched on its fencing token (executemany: one row per parameter set).
_UPDATE_LEASE = update(items).where(
    items.c.batch_id == bindparam("b"),
    items.c.idx == bindparam("i"),
    items.c.attempt == bindparam("a"),
    items.c.state == ItemState.LEASED,
)

# What a lease hands out of an item and its batch.
_LEASE_COLUMNS = (
    items.c.batch_id,
    items.c.idx,
    items.c.attempt,
    items.c.custom_id,
    items.c.body,
    items.c.traceparent,
    batches.c.endpoint,
    batches.c.model,
    batches.c.project_id,
    batches.c.priority_tier,
    batches.c.priority,
    batches.c.created_at,
    batches.c.expires_at,
    batches.c.allowed_models,
)


def _params(refs: Sequence[Ref]) -> list[dict[str, Any]]:
    return [{"b": r.batch_id, "i": r.index, "a": r.attempt} for r in refs]


def _still_running(batch_id: Any, now: Any) -> Any:
    return exists().where(
        batches.c.id == batch_id,
        batches.c.status == BatchStatus.IN_PROGRESS,
        batches.c.expires_at > now,
        batches.c.execution == Execution.EXECUTE,
    )


async def runnable(conn: AsyncConnection, now: float, limit: int) -> list[AnyRow]:
    """scheduler: up to `limit` running batches with queued items, and what a lease needs of each,
    highest priority first; never a natively run one. "Has queued items" is read off the batch's
    lease cursor, never probed in the items (`lease_cursors`; a cursor that lags lists a batch with
    nothing to lease, and its next lease gives fewer items than asked and moves it). Within a
    priority, each project's oldest batch comes before any project's second one (`project_rank`),
    so a project with hundreds of queued batches cannot push another project's only batch out."""
    has_queued = batches.c.lease_cursor < lease_cursors.END
    priority_order = (batches.c.priority_tier.desc(), batches.c.priority.desc())
    ranked = (
        select(
            batches.c.id,
            batches.c.project_id,
            batches.c.priority_tier,
            batches.c.priority,
            batches.c.created_at,
            batches.c.expires_at,
            batches.c.endpoint,
            batches.c.model,
            batches.c.allowed_models,
            func.row_number()
            .over(partition_by=batches.c.project_id, order_by=(*priority_order, batches.c.created_at))
            .label("project_rank"),
        )
        .where(
            batches.c.status == BatchStatus.IN_PROGRESS,
            batches.c.expires_at > now,
            batches.c.execution == Execution.EXECUTE,
            has_queued,
        )
        .subquery()
    )
    query = (
        select(ranked)
        .order_by(
            ranked.c.priority_tier.desc(),
            ranked.c.priority.desc(),
            ranked.c.project_rank,
            ranked.c.created_at,
        )
        .limit(limit)
    )
    return list((await conn.execute(query)).all())


async def leased_by_request(conn: AsyncConnection, executor_id: str, request_id: str) -> list[AnyRow]:
    """scheduler: what the lease call `request_id` leased to the session and is still leased to
    it (`_LEASE_COLUMNS`), in key order."""
    query = (
        select(*_LEASE_COLUMNS)
        .join(batches, batches.c.id == items.c.batch_id)
        .where(
            items.c.state == ItemState.LEASED,
            items.c.leased_by == executor_id,
            items.c.lease_request == request_id,
        )
        .order_by(items.c.batch_id, items.c.idx)
    )
    return list((await conn.execute(query)).all())


def _build_lease(db: Database) -> Any:
    """On PostgreSQL the outer UPDATE finds the picked rows by key alone: given `state =
    'queued'` too, the planner walked the partial index of queued items and filtered it by the
    picked array (its statistics still saw the new batch's items as not queued), so a lease
    read all the batch's queued items (4,936 rows for 64 leased). The picked rows are locked
    with that condition re-checked under the lock, so it holds for them anyway."""
    batch_id: Any = bindparam("p_batch")
    cursor = select(batches.c.lease_cursor).where(batches.c.id == batch_id).scalar_subquery()
    picked = (
        select(items.c.idx)
        .where(items.c.batch_id == batch_id, items.c.state == ItemState.QUEUED, items.c.idx >= cursor)
        .order_by(items.c.idx)
        .limit(bindparam("p_count"))
    )
    queued = () if db.is_postgres else (items.c.state == ItemState.QUEUED,)
    return (
        update(items)
        .where(
            items.c.batch_id == batch_id,
            *queued,
            in_skip_locked(db, items.c.idx, picked),
            _still_running(batch_id, bindparam("p_now")),
        )
        .values(
            state=ItemState.LEASED,
            attempt=items.c.attempt + 1,
            leased_by=bindparam("p_session"),
            lease_request=bindparam("p_request"),
        )
        .returning(items.c.idx, items.c.attempt, items.c.custom_id, items.c.body, items.c.traceparent)
    )


_LEASE = PerDialect(_build_lease)


async def lease_from(
    db: Database,
    conn: AsyncConnection,
    batch_id: str,
    count: int,
    executor_id: str,
    request_id: str,
    now: float,
) -> list[AnyRow]:
    """scheduler: lease up to `count` queued items of a batch that still runs to the session, its
    cursor moved past them; returns (idx, attempt, custom_id, body, traceparent) of each."""
    params = {
        "p_batch": batch_id,
        "p_count": count,
        "p_now": now,
        "p_session": executor_id,
        "p_request": request_id or None,
    }
    rows = list((await conn.execute(_LEASE(db), params)).all())
    await lease_cursors.advance(db, conn, batch_id)
    return rows


_KEEP_SESSION = PerDialect(
    lambda db: upsert(
        db,
        executor_sessions,
        {"id": bindparam("p_id"), "started_at": bindparam("p_now"), "expires_at": bindparam("p_expires")},
        keys=("id",),
        update=("expires_at",),
        where=executor_sessions.c.lapsed_at.is_(None),
    )
)


async def keep_session(
    db: Database, conn: AsyncConnection, executor_id: str, now: float, ttl_s: float
) -> bool:
    """scheduler: open the session or move its expiry; False when it ended (lapsed)."""
    params = {"p_id": executor_id, "p_now": now, "p_expires": now + ttl_s}
    return bool((await conn.execute(_KEEP_SESSION(db), params)).rowcount == 1)


async def heartbeat(conn: AsyncConnection, executor_id: str, expires_at: float) -> bool:
    """scheduler: move a live session's expiry; False when it ended."""
    result = await conn.execute(
        update(executor_sessions)
        .where(executor_sessions.c.id == executor_id, executor_sessions.c.lapsed_at.is_(None))
        .values(expires_at=expires_at)
    )
    return bool(result.rowcount == 1)


async def current(db: Database, conn: AsyncConnection, refs: Sequence[Ref]) -> list[Ref]:
    """scheduler: those of `refs` that are the items' current leases, locked (PostgreSQL) in key
    order. (asyncpg reports no row counts for executemany, so what a batched UPDATE will touch
    is read first, one SELECT per batch.)"""
    by_batch: dict[str, list[int]] = defaultdict(list)
    for r in refs:
        by_batch[r.batch_id].append(r.index)
    found: set[Ref] = set()
    for batch_id in sorted(by_batch):
        rows = await conn.execute(
            lock_rows(
                db,
                select(items.c.idx, items.c.attempt)
                .where(
                    items.c.batch_id == batch_id,
                    items.c.idx.in_(by_batch[batch_id]),
                    items.c.state == ItemState.LEASED,
                )
                .order_by(items.c.idx),
            )
        )
        found.update(Ref(batch_id, r.idx, r.attempt) for r in rows)
    return [r for r in refs if r in found]


async def requeue(conn: AsyncConnection, refs: Sequence[Ref]) -> None:
    """scheduler: queue these current leases again (their holder is shutting down), their
    batches' cursors lowered before `current` locked them (`lease_cursors.lower`)."""
    await conn.execute(_UPDATE_LEASE.values(state=ItemState.QUEUED, leased_by=None), _params(refs))


async def rescue_lapsed(db: Database, conn: AsyncConnection, now: float, forget_before: float) -> int:
    """scheduler: end every session that lapsed and queue its items again (one that held
    nothing is deleted: it may come back as it is); forget sessions ended before
    `forget_before`. Returns the items queued again."""
    lapsed = list(
        (
            await conn.execute(
                lock_rows(
                    db,
                    select(executor_sessions.c.id).where(
                        executor_sessions.c.lapsed_at.is_(None), executor_sessions.c.expires_at < now
                    ),
                )
            )
        ).scalars()
    )
    await conn.execute(executor_sessions.delete().where(executor_sessions.c.lapsed_at < forget_before))
    await lease_cursors.lower_for_sessions(conn, lapsed)  # their items are queued again below
    rescued = 0
    for session in lapsed:
        count = (
            await conn.execute(
                update(items)
                .where(items.c.state == ItemState.LEASED, items.c.leased_by == session)
                .values(state=ItemState.QUEUED, leased_by=None)
            )
        ).rowcount
        ended = executor_sessions.c.id == session
        if count:  # ended for good: its executor hears so and goes on under a new session
            await conn.execute(update(executor_sessions).where(ended).values(lapsed_at=now))
        else:
            await conn.execute(executor_sessions.delete().where(ended))
        rescued += count
    return rescued


async def depth(conn: AsyncConnection) -> tuple[dict[int, int], dict[int, int]]:
    """scheduler: per priority tier, (open items of running batches, queued items of them, counted
    from each batch's lease cursor up: below it the index holds only leased items' entries)."""
    running = batches.c.status.in_(BATCH_RUNNING)
    open_items = batches.c.total - batches.c.completed_count - batches.c.failed_count
    open_by_tier = (
        await conn.execute(
            select(batches.c.priority_tier, func.sum(open_items))
            .where(running)
            .group_by(batches.c.priority_tier)
        )
    ).all()
    queued_by_tier = (
        await conn.execute(
            select(batches.c.priority_tier, func.count())
            .select_from(items.join(batches, batches.c.id == items.c.batch_id))
            .where(items.c.state == ItemState.QUEUED, running, items.c.idx >= batches.c.lease_cursor)
            .group_by(batches.c.priority_tier)
        )
    ).all()
    return (
        {tier: int(n or 0) for tier, n in open_by_tier},
        {tier: int(n or 0) for tier, n in queued_by_tier},
    )


async def statuses(conn: AsyncConnection, batch_ids: Sequence[str]) -> dict[str, AnyRow]:
    """scheduler: (id, status, expires_at) of those of `batch_ids` that exist, by id."""
    query = select(batches.c.id, batches.c.status, batches.c.expires_at).where(batches.c.id.in_(batch_ids))
    return {r.id: r for r in await conn.execute(query)}


async def closing(conn: AsyncConnection, now: float) -> list[AnyRow]:
    """scheduler: (id, status, expires_at) of cancelling batches and running ones past their
    window; not natively run ones (their provider's outcome decides, `native_batches`)."""
    query = select(batches.c.id, batches.c.status, batches.c.expires_at).where(
        (batches.c.status == BatchStatus.CANCELLING)
        | ((batches.c.status == BatchStatus.IN_PROGRESS) & (batches.c.expires_at <= now)),
        batches.c.execution == Execution.EXECUTE,
    )
    return list((await conn.execute(query)).all())


async def close_open(
    db: Database,
    conn: AsyncConnection,
    *,
    batch_id: str,
    end: BatchStatus,
    error_code: str,
    error_message: str,
    hard: bool,
    now: float,
) -> tuple[int, bool]:
    """scheduler: close the running batch's queued items (and, when `hard`, its leased ones) as
    `end`, count them as failed, and record how the batch ends, its row locked first. Returns
    (items closed, whether nothing is open any more)."""
    states = ITEM_OPEN if hard else (ItemState.QUEUED,)
    batch = (
        await conn.execute(
            lock_rows(
                db,
                select(
                    batches.c.status,
                    batches.c.end_status,
                    batches.c.total,
                    batches.c.completed_count,
                    batches.c.failed_count,
                ).where(batches.c.id == batch_id),
            )
        )
    ).first()
    if batch is None or batch.status not in BATCH_RUNNING:
        return 0, False
    closed = (
        await conn.execute(
            update(items)
            .where(items.c.batch_id == batch_id, items.c.state.in_(states))
            .values(
                state=end,
                error_code=error_code,
                error_message=error_message,
                finished_at=now,
                leased_by=None,
            )
        )
    ).rowcount
    if closed:
        # A batch whose items all finished before its deadline still ends `completed`: only
        # closing something decides the end (cancel already decided it).
        await conn.execute(
            update(batches)
            .where(batches.c.id == batch_id)
            .values(failed_count=batches.c.failed_count + closed, end_status=batch.end_status or end)
        )
    settled = batch.completed_count + batch.failed_count + closed >= batch.total
    return int(closed), bool(settled)
