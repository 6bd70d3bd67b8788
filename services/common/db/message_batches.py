"""The SQL of Anthropic Message Batches: finding, counting, paging and deleting them.

A Message Batch is a row of `batches` with `endpoint = MESSAGES_ENDPOINT` (see
`services.common.api_shapes`); these operations see only such rows, and only the caller's
project's, so a Message Batch is never read through the OpenAI routes nor an OpenAI batch
through these. Who may call each operation is said in its docstring.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, func, or_, select
from sqlalchemy.ext.asyncio import AsyncConnection

from batchgate.services.common.api_shapes import MESSAGES_ENDPOINT
from batchgate.services.common.db.blobs import delete_blob
from batchgate.services.common.db.engine import AnyRow
from batchgate.services.common.db.schema import batches, files, idempotency_keys, items
from batchgate.services.common.ids import plausible_id
from batchgate.services.common.states import BATCH_TERMINAL, BatchStatus


def _visible(project_id: str) -> Any:
    """The project's Message Batches a caller may see: created, and not purged by retention."""
    return (
        (batches.c.project_id == project_id)
        & (batches.c.endpoint == MESSAGES_ENDPOINT)
        & (batches.c.status != BatchStatus.VALIDATING)
        & batches.c.purged_at.is_(None)
    )


async def find(conn: AsyncConnection, project_id: str, batch_id: str) -> AnyRow | None:
    """The project's Message Batch `batch_id` (the whole `batches` row), or None: unknown,
    another project's, an OpenAI batch, or still being created. Ingest and results."""
    if not plausible_id(batch_id):
        return None
    query = select(batches).where(batches.c.id == batch_id, _visible(project_id))
    return (await conn.execute(query)).first()


async def item_state_counts(conn: AsyncConnection, rows: Sequence[AnyRow]) -> dict[str, Counter[str]]:
    """Items per state of each batch in `rows` that has failures (the counters on the batch
    row tell succeeded from failed only; cancelled, expired and rejected items are all
    "failed" there). Batches without failures need no query. Ingest."""
    wanted = [row.id for row in rows if row.failed_count]
    counts: dict[str, Counter[str]] = {}
    if not wanted:
        return counts
    query = (
        select(items.c.batch_id, items.c.state, func.count())
        .where(items.c.batch_id.in_(wanted))
        .group_by(items.c.batch_id, items.c.state)
    )
    for batch_id, state, count in (await conn.execute(query)).all():
        counts.setdefault(batch_id, Counter())[state] = int(count)
    return counts


@dataclass(frozen=True, kw_only=True)
class Page:
    rows: list[AnyRow]
    """Newest first."""
    has_more: bool
    """Whether more batches lie beyond the page in the direction paged."""


async def page(conn: AsyncConnection, project_id: str, *, after_id: str, before_id: str, limit: int) -> Page:
    """The project's Message Batches, newest first: the `limit` right after (older than)
    `after_id`, or right before (newer than) `before_id`, or the newest. Ingest."""
    query = select(batches).where(_visible(project_id))
    if before_id:
        query = query.where(batches.c.id > before_id).order_by(batches.c.id.asc())
    else:
        if after_id:
            query = query.where(batches.c.id < after_id)
        query = query.order_by(batches.c.id.desc())
    rows = list((await conn.execute(query.limit(limit + 1))).all())
    has_more = len(rows) > limit
    rows = rows[:limit]
    if before_id:
        rows.reverse()
    return Page(rows=rows, has_more=has_more)


async def delete_ended(conn: AsyncConnection, row: AnyRow) -> bool:
    """Delete the ended Message Batch `row` with its items, its files (the stored requests,
    rejections and any result files) and their blobs, in the caller's transaction; False
    (nothing deleted) when it is not ended. Usage events stay: they are the project's
    bill. Ingest."""
    gone = await conn.execute(
        delete(batches).where(batches.c.id == row.id, batches.c.status.in_(BATCH_TERMINAL))
    )
    if not gone.rowcount:
        return False
    await conn.execute(delete(items).where(items.c.batch_id == row.id))
    owned = (
        await conn.execute(
            select(files.c.id, files.c.blob_id).where(
                or_(files.c.batch_id == row.id, files.c.id == row.input_file_id),
                files.c.project_id == row.project_id,
            )
        )
    ).all()
    for file in owned:
        await conn.execute(delete(files).where(files.c.id == file.id))
        await delete_blob(conn, file.blob_id)
    await conn.execute(delete(idempotency_keys).where(idempotency_keys.c.batch_id == row.id))
    return True
