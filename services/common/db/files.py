"""The `files` table: the only place its SQL lives. Content lives in blobs (`storage`).

Who may call what: ingest inserts input files (uploads, a create's inline input and
rejections file), reads, lists and deletes what a project sees, and reclaims expired files;
results inserts the `batch_output` files a finalize writes (`insert`, nothing else).

A file past its `expires_at` reads as gone everywhere (`live`), before the sweep reclaims it.
"""

from __future__ import annotations

import time

from sqlalchemy import ColumnElement, delete, insert, select
from sqlalchemy.ext.asyncio import AsyncConnection

from batchgate.services.common.db.dialect import lock_rows
from batchgate.services.common.db.engine import AnyRow, Database
from batchgate.services.common.db.schema import files
from batchgate.services.common.states import FilePurpose, FileStatus


def live(now: float) -> ColumnElement[bool]:
    """The one expiry rule: a file without `expires_at`, or whose `expires_at` is later than now."""
    return files.c.expires_at.is_(None) | (files.c.expires_at > now)


async def insert_file(
    conn: AsyncConnection,
    *,
    file_id: str,
    project_id: str,
    filename: str,
    purpose: FilePurpose | str,
    blob_id: str,
    size: int,
    line_count: int,
    created_at: float,
    expires_at: float | None,
    batch_id: str | None = None,
) -> None:
    """ingest (uploads, a create's files), results (output and error files): insert a processed
    file whose blob is complete, in the caller's transaction."""
    await conn.execute(
        insert(files).values(
            id=file_id,
            project_id=project_id,
            filename=filename,
            purpose=purpose,
            bytes=size,
            line_count=line_count,
            blob_id=blob_id,
            status=FileStatus.PROCESSED,
            created_at=created_at,
            expires_at=expires_at,
            batch_id=batch_id,
        )
    )


async def get(conn: AsyncConnection, file_id: str) -> AnyRow:
    """ingest: the row of a file known to exist."""
    return (await conn.execute(select(files).where(files.c.id == file_id))).one()


async def get_or_none(conn: AsyncConnection, file_id: str) -> AnyRow | None:
    """the scheduler's retention: a file's row, if it still exists."""
    return (await conn.execute(select(files).where(files.c.id == file_id))).first()


async def visible(
    conn: AsyncConnection, project_id: str, file_id: str, lock_in: Database | None = None
) -> AnyRow | None:
    """ingest: the project's unexpired file `file_id`. With `lock_in`, the row stays locked until
    the transaction ends (PostgreSQL), so a concurrent delete and a create reading the file
    cannot both succeed."""
    query = select(files).where(files.c.id == file_id, files.c.project_id == project_id, live(time.time()))
    if lock_in is not None:
        query = lock_rows(lock_in, query)
    return (await conn.execute(query)).first()


async def expiry(conn: AsyncConnection, project_id: str, file_id: str) -> AnyRow | None:
    """ingest (a recurring template's run): the project's file `file_id` with its `expires_at`,
    expired or not; None once it was deleted."""
    query = select(files.c.expires_at).where(files.c.id == file_id, files.c.project_id == project_id)
    return (await conn.execute(query)).first()


async def page(
    conn: AsyncConnection, project_id: str, *, purpose: str, after: str, ascending: bool, limit: int
) -> list[AnyRow]:
    """ingest: up to `limit` of the project's unexpired files in id order, after the id `after`,
    optionally of one purpose."""
    query = select(files).where(files.c.project_id == project_id, live(time.time()))
    if purpose:
        query = query.where(files.c.purpose == purpose)
    if after:
        query = query.where(files.c.id > after if ascending else files.c.id < after)
    query = query.order_by(files.c.id.asc() if ascending else files.c.id.desc()).limit(limit)
    return list((await conn.execute(query)).all())


async def delete_file(conn: AsyncConnection, file_id: str) -> None:
    """ingest, scheduler (retention): remove a file's row (its blob is the caller's to delete,
    in the same transaction)."""
    await conn.execute(delete(files).where(files.c.id == file_id))


async def expired(conn: AsyncConnection, limit: int) -> list[AnyRow]:
    """ingest: (id, blob_id) of up to `limit` files past their `expires_at`."""
    query = select(files.c.id, files.c.blob_id).where(~live(time.time())).limit(limit)
    return list((await conn.execute(query)).all())


async def of_batch(conn: AsyncConnection, batch_id: str) -> list[AnyRow]:
    """bench, tests, the scheduler's retention: the files a batch produced."""
    return list((await conn.execute(select(files).where(files.c.batch_id == batch_id))).all())
