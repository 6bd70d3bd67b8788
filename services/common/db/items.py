"""The `items` table (one row per input record): the only place its SQL lives, besides the
scheduler's queue statements over items and sessions (`batchgate.services.common.db.queue`).

Who may call what: ingest inserts a create's items (`queued` or `rejected`), deletes those
of a discarded create and reads those a retry runs again; results stores outcomes over
current leases (`lock_current`, `store_outcomes`) and reads items to write the output and
error files.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import and_, bindparam, case, delete, func, or_, select, text, update
from sqlalchemy.ext.asyncio import AsyncConnection

from batchgate.services.common.db.dialect import DriverMany, PerDialect, insert_rows, lock_rows
from batchgate.services.common.db.engine import AnyRow, Database
from batchgate.services.common.db.schema import batches, items
from batchgate.services.common.states import (
    ITEM_CLOSED,
    ITEM_OPEN,
    ITEM_REPORTED,
    Execution,
    ItemErrorCode,
    ItemState,
)

# The item columns an output or error line needs, in the order `LineRenderer.line` unpacks them.
LINE_COLUMNS = (
    items.c.idx,
    items.c.custom_id,
    items.c.state,
    items.c.status_code,
    items.c.response,
    items.c.request_id,
    items.c.error_code,
    items.c.error_message,
)

# One outcome over its current lease (executemany: one parameter set per outcome).
_STORE = DriverMany(
    update(items)
    .where(
        items.c.batch_id == bindparam("b_batch"),
        items.c.idx == bindparam("b_idx"),
        items.c.attempt == bindparam("b_attempt"),
        # not IN (…): an expanding parameter cannot go through executemany
        or_(*(items.c.state == state for state in ITEM_OPEN)),
    )
    .values(
        state=bindparam("state"),
        status_code=bindparam("status_code"),
        response=bindparam("response"),
        request_id=bindparam("request_id"),
        error_code=bindparam("error_code"),
        error_message=bindparam("error_message"),
        model_used=bindparam("model_used"),
        provider=bindparam("provider"),
        prompt_tokens=bindparam("prompt_tokens"),
        completion_tokens=bindparam("completion_tokens"),
        cached_tokens=bindparam("cached_tokens"),
        reasoning_tokens=bindparam("reasoning_tokens"),
        cost_usd=bindparam("cost_usd"),
        attempts=bindparam("attempts"),
        latency_ms=bindparam("latency_ms"),
        finished_at=bindparam("finished_at"),
        leased_by=None,
    )
)


# --- ingest -------------------------------------------------------------------------------------


async def insert_chunk(db: Database, rows: list[dict[str, Any]]) -> None:
    """ingest: insert a chunk of a create's items, in a transaction of its own."""
    await insert_rows(db, items, rows)


async def delete_of_batch(conn: AsyncConnection, batch_id: str) -> None:
    """ingest: remove the items of a discarded create; scheduler: those of a batch that
    retention purges."""
    await conn.execute(delete(items).where(items.c.batch_id == batch_id))


async def rejected(conn: AsyncConnection, batch_id: str, limit: int) -> list[AnyRow]:
    """ingest: (line, custom_id, error_code, error_message) of a batch's first rejected records."""
    query = (
        select(items.c.line, items.c.custom_id, items.c.error_code, items.c.error_message)
        .where(items.c.batch_id == batch_id, items.c.state == ItemState.REJECTED)
        .order_by(items.c.idx)
        .limit(limit)
    )
    return list((await conn.execute(query)).all())


async def retryable(conn: AsyncConnection, batch_id: str, states: tuple[str, ...]) -> list[AnyRow]:
    """ingest: (custom_id, body) of the batch's items that ended in `states` and have a request
    body (a rejected record has none), in input order: what a retry runs again. An item a
    cancel ended while it ran (a workflow between steps: its executor reports it failed with
    `batch_cancelled`, what it used billed) ended cancelled, not failed."""
    stopped_mid_run = and_(
        items.c.state == ItemState.FAILED, items.c.error_code == ItemErrorCode.BATCH_CANCELLED
    )
    ended_as = case((stopped_mid_run, ItemState.CANCELLED.value), else_=items.c.state)
    query = (
        select(items.c.custom_id, items.c.body)
        .where(items.c.batch_id == batch_id, ended_as.in_(states), items.c.body.is_not(None))
        .order_by(items.c.idx)
    )
    return list((await conn.execute(query)).all())


# --- results ------------------------------------------------------------------------------------


_LOCK_CURRENT = PerDialect(
    lambda db: lock_rows(
        db,
        select(items.c.idx, items.c.state, items.c.attempt, items.c.custom_id).where(
            items.c.batch_id == bindparam("p_batch"), items.c.idx.in_(bindparam("p_indexes", expanding=True))
        ),
    )
)


async def lock_current(
    db: Database, conn: AsyncConnection, batch_id: str, indexes: Sequence[int]
) -> dict[int, AnyRow]:
    """results: (idx, state, attempt, custom_id) of the batch's items `indexes`, locked
    (PostgreSQL) after the batch row, by index."""
    params = {"p_batch": batch_id, "p_indexes": list(indexes)}
    return {r.idx: r for r in (await conn.execute(_LOCK_CURRENT(db), params)).all()}


async def store_outcomes(conn: AsyncConnection, rows: list[dict[str, Any]]) -> None:
    """results: store outcomes, each only over its item's current open lease (`b_batch`,
    `b_idx`, `b_attempt` name the lease; the other keys are the outcome columns)."""
    await _STORE.run(conn, rows)


async def line_page(
    conn: AsyncConnection,
    batch_id: str,
    after: int,
    states: tuple[str, ...] | None,
    limit: int,
    with_body: bool = False,
) -> list[AnyRow]:
    """results: up to `limit` items (LINE_COLUMNS, then the request `body` when `with_body`)
    after the index `after`, in input order, optionally only those in `states`."""
    columns = (*LINE_COLUMNS, items.c.body) if with_body else LINE_COLUMNS
    query = select(*columns).where(items.c.batch_id == batch_id, items.c.idx > after)
    if states is not None:
        query = query.where(items.c.state.in_(states))
    return list((await conn.execute(query.order_by(items.c.idx).limit(limit))).all())


async def closed_counts(conn: AsyncConnection, batch_id: str) -> list[AnyRow]:
    """results: (state, error_code, count) of the batch's items that ended without an executor."""
    query = (
        select(items.c.state, items.c.error_code, func.count())
        .where(items.c.batch_id == batch_id, items.c.state.in_(ITEM_CLOSED))
        .group_by(items.c.state, items.c.error_code)
    )
    return list((await conn.execute(query)).all())


async def traced_unrecorded(conn: AsyncConnection, batch_id: str) -> list[AnyRow]:
    """results: (idx, custom_id, state, traceparent) of the batch's traced items whose outcome
    no executor reported (cancelled, expired; every item of a natively run batch), in order:
    the items whose trace has no record span of results."""
    execution = select(batches.c.execution).where(batches.c.id == batch_id).scalar_subquery()
    query = (
        select(items.c.idx, items.c.custom_id, items.c.state, items.c.traceparent)
        .where(
            items.c.batch_id == batch_id,
            items.c.traceparent.is_not(None),
            or_(items.c.state.not_in(list(ITEM_REPORTED)), execution == Execution.NATIVE),
        )
        .order_by(items.c.idx)
    )
    return list((await conn.execute(query)).all())


async def refresh_statistics(db: Database) -> None:
    """scheduler: have PostgreSQL sample `items` again (ANALYZE; nothing on SQLite) after a
    large batch arrived. Until autovacuum gets to it, the planner's statistics predate the
    batch's items, and the plans the hot statements cached meanwhile read the whole batch per
    call: recording 64 outcomes of a new 100,000-item batch took 165 ms (0.5 ms after)."""
    if db.is_postgres:
        async with db.engine.connect() as conn:
            await conn.execute(text("ANALYZE items"))
            await conn.commit()
