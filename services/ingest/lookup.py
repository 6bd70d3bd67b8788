"""Finding the caller's own files and batches: anything else reads as 404, never 403.

Another project's object, an unknown id, an expired file and a batch still being created
all get the same answer, so nobody learns that an id exists elsewhere.
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import Row, select
from sqlalchemy.ext.asyncio import AsyncConnection

from services.common import errors
from services.common.db import Database
from services.common.db.dialect import lock_rows
from services.common.db.schema import batches, files
from services.common.ids import plausible_id


async def visible_file(
    conn: AsyncConnection, project_id: str, ident: str, lock_in: Database | None = None
) -> Row[Any]:
    """The caller's file `ident`, or 404 (unknown, another project's, or expired).

    With `lock_in`, the row stays locked until the transaction ends (PostgreSQL), so a
    concurrent delete and a create that reads the file cannot both succeed.
    """
    if not plausible_id(ident):
        raise errors.not_found("file", ident[:80], "file_id")
    query = select(files).where(files.c.id == ident, files.c.project_id == project_id)
    if lock_in is not None:
        query = lock_rows(lock_in, query)
    row = (await conn.execute(query)).first()
    if row is None or (row.expires_at is not None and row.expires_at <= time.time()):
        raise errors.not_found("file", ident, "file_id")
    return row


async def visible_batch(conn: AsyncConnection, project_id: str, ident: str) -> Row[Any]:
    """The caller's batch `ident`, or 404 (unknown, another project's, or still being created)."""
    if not plausible_id(ident):
        raise errors.not_found("batch", ident[:80], "batch_id")
    row = (
        await conn.execute(
            select(batches).where(
                batches.c.id == ident, batches.c.project_id == project_id, batches.c.status != "validating"
            )
        )
    ).first()
    if row is None:
        raise errors.not_found("batch", ident, "batch_id")
    return row


def cursor(after: str) -> str:
    """A listing's `after` cursor, checked the way an id is."""
    if after and not plausible_id(after):
        raise errors.invalid("'after' is not an id from a previous page.", "invalid_after", "after")
    return after
