"""Finding the caller's own files and batches: anything else reads as 404, never 403.

Another project's object, an unknown id, an expired file and a batch still being created
all get the same answer, so nobody learns that an id exists elsewhere.
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import Row, select
from sqlalchemy.ext.asyncio import AsyncConnection

from services.common import errors, paging
from services.common.api_shapes import MESSAGES_ENDPOINT
from services.common.db import Database
from services.common.db.dialect import lock_rows
from services.common.db.schema import batches, files
from services.common.ids import plausible_id


async def visible_file(
    conn: AsyncConnection,
    project_id: str,
    ident: str,
    lock_in: Database | None = None,
    param: str = "file_id",
) -> Row[Any]:
    """The caller's file `ident`, or 404 naming `param` (unknown, another project's, or expired).

    With `lock_in`, the row stays locked until the transaction ends (PostgreSQL), so a
    concurrent delete and a create that reads the file cannot both succeed.
    """
    if not plausible_id(ident):
        raise errors.not_found("file", ident[:80], param)
    query = select(files).where(files.c.id == ident, files.c.project_id == project_id)
    if lock_in is not None:
        query = lock_rows(lock_in, query)
    row = (await conn.execute(query)).first()
    if row is None or (row.expires_at is not None and row.expires_at <= time.time()):
        raise errors.not_found("file", ident, param)
    return row


async def visible_batch(
    conn: AsyncConnection, project_id: str, ident: str, *, message_batch: bool = False
) -> Row[Any]:
    """The caller's batch `ident`, or 404 (unknown, another project's, still being created, or
    made through the other API: an OpenAI batch when `message_batch`, else a Message Batch)."""
    if not plausible_id(ident):
        raise errors.not_found("batch", ident[:80], "batch_id")
    endpoint = batches.c.endpoint
    row = (
        await conn.execute(
            select(batches).where(
                batches.c.id == ident,
                batches.c.project_id == project_id,
                batches.c.status != "validating",
                endpoint == MESSAGES_ENDPOINT if message_batch else endpoint != MESSAGES_ENDPOINT,
            )
        )
    ).first()
    if row is None:
        raise errors.not_found("batch", ident, "batch_id")
    return row


async def check_cursor(conn: AsyncConnection, project_id: str, kind: str, after: str) -> None:
    """400 `invalid_after` unless `after` is one of the caller's visible batches or files."""
    try:
        if kind == "batch":
            await visible_batch(conn, project_id, after)
        else:
            await visible_file(conn, project_id, after)
    except errors.ApiError as exc:
        if exc.status != 404:
            raise
        raise paging.unknown_cursor(kind, after[:80]) from None
