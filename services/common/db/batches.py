"""The `batches` table: the only place its SQL lives.

Who may call what (each operation's docstring starts with the services allowed):
- ingest creates a batch (`insert_validating`), publishes it (`transition` → in_progress),
  discards an interrupted create, reads and lists what a project sees and edits metadata;
- the scheduler asks for cancel (`request_cancel`) and reads statuses (its queue statements,
  `batchgate.services.common.db.queue`, read and close running batches);
- results folds outcomes into the counters (`add_outcomes`), claims and ends a finalize
  (`claim_finalize`, `transition` → finalizing → completed | expired | cancelled);
- ingest counts open batches and committed spend for a create's budget hold
  (`open_counts`, `committed_spend`); results counts rejections for usage (`rejections`);
- the scheduler's retention purges ended batches and later forgets them: those operations
  are in `batchgate.services.common.db.batch_retention`.

Every status change is a conditional UPDATE from the allowed previous statuses
(`states.BATCH_TRANSITIONS`), stamping the matching `<status>_at` column, so concurrent actors
(several scheduler or results replicas) cannot move a batch backwards or twice. `end_status`
records how the batch will end (`cancelled` once cancel is asked, `expired` once the window
passed); finalizing applies it.
"""

from __future__ import annotations

import time
from typing import Any, TypedDict

from sqlalchemy import ColumnElement, bindparam, case, delete, func, insert, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from batchgate.services.common.api_shapes import MESSAGES_ENDPOINT
from batchgate.services.common.db.batch_visibility import visible_conditions
from batchgate.services.common.db.dialect import PerDialect, json_object_has, lock_rows
from batchgate.services.common.db.engine import AnyRow, Database
from batchgate.services.common.db.schema import batches
from batchgate.services.common.db.usage import UsageFilter
from batchgate.services.common.states import (
    BATCH_OPEN,
    BATCH_RUNNING,
    BATCH_TRANSITIONS,
    BatchStatus,
)

TIMESTAMP_COLUMN = {status: f"{status}_at" for status in BATCH_TRANSITIONS}


async def transition(conn: AsyncConnection, batch_id: str, to: BatchStatus, **values: Any) -> bool:
    """ingest (→ in_progress), scheduler (→ cancelling), results (→ finalizing and the ends):
    move `batch_id` to `to` if its current status allows it; returns whether it moved."""
    values = {"status": to, TIMESTAMP_COLUMN[to]: time.time(), **values}
    result = await conn.execute(
        update(batches)
        .where(batches.c.id == batch_id, batches.c.status.in_(BATCH_TRANSITIONS[to]))
        .values(**values)
    )
    return result.rowcount == 1


# --- ingest -------------------------------------------------------------------------------------


async def insert_validating(conn: AsyncConnection, **values: Any) -> None:
    """ingest: insert a new batch as `validating` (invisible until it is published)."""
    await conn.execute(insert(batches).values(status=BatchStatus.VALIDATING, **values))


async def get(conn: AsyncConnection, batch_id: str) -> AnyRow:
    """ingest, results: the full row of a batch known to exist."""
    return (await conn.execute(select(batches).where(batches.c.id == batch_id))).one()


async def visible(
    conn: AsyncConnection,
    project_id: str,
    batch_id: str,
    *columns: ColumnElement[Any],
    message_batch: bool | None = False,
) -> AnyRow | None:
    """ingest, results: the project's batch `batch_id` (all columns, or `columns`), unless it is
    unknown, another project's, still being created, purged by retention, or made through the
    other API (`message_batch`: True for Message Batches only, False for OpenAI batches only,
    None for either, as usage reads them)."""
    query = select(*columns) if columns else select(batches)
    return (await conn.execute(query.where(*visible_conditions(project_id, batch_id, message_batch)))).first()


async def page(
    db: Database,
    conn: AsyncConnection,
    project_id: str,
    *,
    status: str = "",
    metadata_key: str = "",
    metadata_value: str | None = None,
    template_id: str = "",
    after: str = "",
    limit: int,
) -> list[AnyRow]:
    """ingest: up to `limit` of the project's visible OpenAI batches (Message Batches list through
    their own API), newest first, after the id `after`, filtered by status, by a metadata key
    (and value) and by the recurring template whose runs they are."""
    query = select(batches).where(
        batches.c.project_id == project_id,
        batches.c.status != BatchStatus.VALIDATING,
        batches.c.purged_at.is_(None),
        batches.c.endpoint != MESSAGES_ENDPOINT,
    )
    if status:
        query = query.where(batches.c.status == status)
    if metadata_key:
        query = query.where(json_object_has(db, batches.c.metadata, metadata_key, metadata_value))
    if template_id:
        query = query.where(batches.c.template_id == template_id)
    if after:
        query = query.where(batches.c.id < after)
    return list((await conn.execute(query.order_by(batches.c.id.desc()).limit(limit))).all())


async def runs_of_template(
    conn: AsyncConnection, project_id: str, template_id: str, limit: int
) -> list[AnyRow]:
    """ingest: the newest `limit` published runs of the project's recurring template that
    retention has not purged (a purged run answers 404, as in `?template_id=` lists)."""
    query = (
        select(batches)
        .where(
            batches.c.template_id == template_id,
            batches.c.project_id == project_id,
            batches.c.status != BatchStatus.VALIDATING,
            batches.c.purged_at.is_(None),
        )
        .order_by(batches.c.id.desc())
        .limit(limit)
    )
    return list((await conn.execute(query)).all())


async def retry_made(conn: AsyncConnection, retry_of: str, selection: str) -> str | None:
    """ingest: the visible batch that already retried `retry_of` with `selection`, if any."""
    query = select(batches.c.id).where(
        batches.c.retry_of == retry_of,
        batches.c.retry_selection == selection,
        batches.c.status != BatchStatus.VALIDATING,
    )
    return (await conn.execute(query.order_by(batches.c.id).limit(1))).scalar()


async def retries_of(conn: AsyncConnection, batch_ids: list[str]) -> dict[str, list[str]]:
    """ingest: the visible retries of each of `batch_ids`, oldest first (absent: none)."""
    if not batch_ids:
        return {}
    query = (
        select(batches.c.retry_of, batches.c.id)
        .where(batches.c.retry_of.in_(batch_ids), batches.c.status != BatchStatus.VALIDATING)
        .order_by(batches.c.id)
    )
    found: dict[str, list[str]] = {}
    for row in (await conn.execute(query)).all():
        found.setdefault(row.retry_of, []).append(row.id)
    return found


async def set_metadata(conn: AsyncConnection, batch_id: str, metadata_json: str | None) -> None:
    """ingest: replace a batch's metadata (a JSON object, or None for none)."""
    await conn.execute(update(batches).where(batches.c.id == batch_id).values(metadata=metadata_json))


async def open_readers(conn: AsyncConnection, input_file_id: str) -> list[AnyRow]:
    """ingest: (id, status) of the open batches reading the file `input_file_id`."""
    return list(
        (
            await conn.execute(
                select(batches.c.id, batches.c.status).where(
                    batches.c.input_file_id == input_file_id, batches.c.status.in_(BATCH_OPEN)
                )
            )
        ).all()
    )


async def delete_validating(conn: AsyncConnection, batch_id: str) -> bool:
    """ingest: remove a batch that never left `validating`; whether there was one."""
    gone = await conn.execute(
        delete(batches).where(batches.c.id == batch_id, batches.c.status == BatchStatus.VALIDATING)
    )
    return bool(gone.rowcount)


async def stale_validating(conn: AsyncConnection, created_before: float) -> list[str]:
    """ingest: batches still `validating` that were created before `created_before`."""
    query = select(batches.c.id).where(
        batches.c.status == BatchStatus.VALIDATING, batches.c.created_at < created_before
    )
    return list((await conn.execute(query)).scalars().all())


async def open_counts(conn: AsyncConnection, project_id: str, key_id: str) -> tuple[int, int]:
    """ingest: how many published batches have not ended, of the project and of the key."""
    query = select(
        func.count(),
        func.coalesce(func.sum(case((batches.c.api_key_id == key_id, 1), else_=0)), 0),
    ).where(
        batches.c.project_id == project_id,
        batches.c.status.in_([s for s in BATCH_OPEN if s != BatchStatus.VALIDATING]),
    )
    row = (await conn.execute(query)).one()
    return int(row[0]), int(row[1])


async def committed_spend(conn: AsyncConnection, project_id: str, key_id: str) -> tuple[float, float]:
    """ingest: (key's, project's) spend counting holds: an open batch counts as the larger of
    its hold and its cost so far, an ended one as its cost."""
    committed = case(
        (
            batches.c.status.in_(BATCH_OPEN) & (batches.c.hold_usd > batches.c.cost_usd),
            batches.c.hold_usd,
        ),
        else_=batches.c.cost_usd,
    )
    query = select(
        func.coalesce(func.sum(case((batches.c.api_key_id == key_id, committed), else_=0.0)), 0.0),
        func.coalesce(func.sum(committed), 0.0),
    ).where(batches.c.project_id == project_id)
    row = (await conn.execute(query)).one()
    return float(row[0]), float(row[1])


# --- results ----------------------------------------------------------------------------------


async def rejections(conn: AsyncConnection, where: UsageFilter, group_by: list[str]) -> list[AnyRow]:
    """results: records rejected at create, summed per usage group (`group_by` of batch_id,
    model, api_key_id; column `rejected`) over the project's batches created in the time range.
    Purged batches count: their bookkeeping stays."""
    columns = {"batch_id": batches.c.id, "model": batches.c.model, "api_key_id": batches.c.api_key_id}
    conditions = [
        batches.c.project_id == where.project_id,
        batches.c.status != BatchStatus.VALIDATING,
        batches.c.rejected_count > 0,
    ]
    if where.start_time:
        conditions.append(batches.c.created_at >= where.start_time)
    if where.end_time:
        conditions.append(batches.c.created_at < where.end_time)
    for name, value in (
        ("batch_id", where.batch_id),
        ("model", where.model),
        ("api_key_id", where.api_key_id),
    ):
        if value:
            conditions.append(columns[name] == value)
    keys = [columns[k].label(k) for k in group_by]
    query = select(*keys, func.sum(batches.c.rejected_count).label("rejected")).where(*conditions)
    if keys:
        query = query.group_by(*keys)
    return list((await conn.execute(query)).all())


# --- scheduler ----------------------------------------------------------------------------------


async def request_cancel(conn: AsyncConnection, batch_id: str) -> bool:
    """scheduler: in_progress → cancelling, to end `cancelled` (a batch that already expired
    stays expired); whether it moved."""
    return await transition(
        conn,
        batch_id,
        BatchStatus.CANCELLING,
        end_status=func.coalesce(batches.c.end_status, BatchStatus.CANCELLED),
    )


async def status_of(conn: AsyncConnection, batch_id: str) -> str | None:
    """scheduler: the batch's status (None: unknown)."""
    status = (await conn.execute(select(batches.c.status).where(batches.c.id == batch_id))).scalar()
    return None if status is None else str(status)


async def total_of(conn: AsyncConnection, batch_id: str) -> int:
    """scheduler: the batch's item count (0: unknown)."""
    return int((await conn.execute(select(batches.c.total).where(batches.c.id == batch_id))).scalar() or 0)


# --- results ------------------------------------------------------------------------------------


_LOCK_FOR_RECORD = PerDialect(
    lambda db: lock_rows(
        db,
        select(batches.c.project_id, batches.c.api_key_id, batches.c.discount, batches.c.total).where(
            batches.c.id == bindparam("p_batch")
        ),
    )
)


async def lock_for_record(db: Database, conn: AsyncConnection, batch_id: str) -> AnyRow | None:
    """results: (project_id, api_key_id, discount, total) of a batch whose outcomes are being
    recorded, its row locked first (PostgreSQL) so that recording and closing cannot deadlock."""
    row: AnyRow | None = (await conn.execute(_LOCK_FOR_RECORD(db), {"p_batch": batch_id})).first()
    return row


class OutcomeCounts(TypedDict):
    """What one recorded group adds to its batch's counters (the columns' names)."""

    completed_count: int
    failed_count: int
    input_tokens: int
    cached_tokens: int
    output_tokens: int
    reasoning_tokens: int
    cost_usd: float


_ADD_OUTCOMES = (
    update(batches)
    .where(batches.c.id == bindparam("p_batch"))
    .values({c: batches.c[c] + bindparam(f"p_{c}") for c in OutcomeCounts.__annotations__})
    .returning(batches.c.completed_count, batches.c.failed_count)
)


async def add_outcomes(conn: AsyncConnection, batch_id: str, added: OutcomeCounts) -> AnyRow:
    """results: fold recorded outcomes into the counters; returns the new (completed_count,
    failed_count)."""
    params = {"p_batch": batch_id, **{f"p_{column}": value for column, value in added.items()}}
    return (await conn.execute(_ADD_OUTCOMES, params)).one()


async def claim_finalize(conn: AsyncConnection, batch_id: str, lease_until: float) -> AnyRow | None:
    """results: claim the finalize of a batch that is due (nothing open: → finalizing) or whose
    finalizer's lease lapsed, until `lease_until`. Returns (created_at, traceparent, endpoint)
    when claimed, None when it is not due or another replica holds it."""
    row = (
        await conn.execute(
            select(
                batches.c.status,
                batches.c.total,
                batches.c.completed_count,
                batches.c.failed_count,
                batches.c.created_at,
                batches.c.traceparent,
                batches.c.endpoint,
            ).where(batches.c.id == batch_id)
        )
    ).first()
    if row is None:
        return None
    if row.status in BATCH_RUNNING:
        if row.completed_count + row.failed_count < row.total:
            return None
        moved = await transition(conn, batch_id, BatchStatus.FINALIZING, finalize_lease_until=lease_until)
        return row if moved else None
    if row.status == BatchStatus.FINALIZING:
        result = await conn.execute(
            update(batches)
            .where(
                batches.c.id == batch_id,
                batches.c.status == BatchStatus.FINALIZING,
                or_(batches.c.finalize_lease_until.is_(None), batches.c.finalize_lease_until < time.time()),
            )
            .values(finalize_lease_until=lease_until)
        )
        return row if result.rowcount == 1 else None
    return None


async def renew_finalize(conn: AsyncConnection, batch_id: str, until: float | None) -> None:
    """results: move (or, with None, drop) the lease of a finalize in progress."""
    await conn.execute(
        update(batches)
        .where(batches.c.id == batch_id, batches.c.status == BatchStatus.FINALIZING)
        .values(finalize_lease_until=until)
    )


async def due_for_finalize(conn: AsyncConnection) -> list[str]:
    """results: batches with nothing open left, and finalizes whose replica stopped renewing."""
    now = time.time()
    query = select(batches.c.id).where(
        or_(
            (batches.c.status.in_(BATCH_RUNNING))
            & (batches.c.completed_count + batches.c.failed_count >= batches.c.total),
            (batches.c.status == BatchStatus.FINALIZING)
            & (batches.c.finalize_lease_until.is_(None) | (batches.c.finalize_lease_until < now)),
        )
    )
    return list((await conn.execute(query)).scalars().all())
