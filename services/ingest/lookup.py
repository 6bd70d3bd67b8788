"""Finding the caller's own files and batches: anything else reads as 404, never 403.

Another project's object, an unknown id, an expired file and a batch still being created
all get the same answer, so nobody learns that an id exists elsewhere.
"""

from __future__ import annotations

from batchgate.services.common import errors
from batchgate.services.common.db import AnyRow, Connection, Database, batch_visibility, batches, files
from batchgate.services.common.ids import plausible_id


async def visible_file(
    conn: Connection,
    project_id: str,
    ident: str,
    lock_in: Database | None = None,
    param: str = "file_id",
) -> AnyRow:
    """The caller's file `ident`, or 404 naming `param` (unknown, another project's, or expired).

    With `lock_in`, the row stays locked until the transaction ends (PostgreSQL), so a
    concurrent delete and a create that reads the file cannot both succeed.
    """
    if not plausible_id(ident):
        raise errors.not_found("file", ident[:80], param)
    row = await files.visible(conn, project_id, ident, lock_in)
    if row is None:
        raise errors.not_found("file", ident, param)
    return row


async def visible_batch(
    conn: Connection, project_id: str, ident: str, *, message_batch: bool = False
) -> AnyRow:
    """The caller's batch `ident`, or 404 (unknown, another project's, still being created, or
    made through the other API: an OpenAI batch when `message_batch`, else a Message Batch)."""
    _check_batch_id(ident)
    return _found_batch(await batches.visible(conn, project_id, ident, message_batch=message_batch), ident)


async def visible_batch_and_retries(
    conn: Connection, project_id: str, ident: str
) -> tuple[AnyRow, list[str]]:
    """`visible_batch` of an OpenAI batch, with the batches that retried it (one statement)."""
    _check_batch_id(ident)
    row, retries = await batch_visibility.visible_with_retries(conn, project_id, ident)
    return _found_batch(row, ident), retries


def _check_batch_id(ident: str) -> None:
    if not plausible_id(ident):
        raise errors.not_found("batch", ident[:80], "batch_id")


def _found_batch(row: AnyRow | None, ident: str) -> AnyRow:
    if row is None:
        raise errors.not_found("batch", ident, "batch_id")
    return row
