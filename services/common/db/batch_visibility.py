"""Which batches a project sees, and the read that polls of one batch make.

Every read of "the caller's batch" applies `visible_conditions`: another project's batch, one
still being created, one purged by retention and one made through the other API read as
unknown. `visible_with_retries` is GetBatch's read: the batch and its retries in one
statement, since that read runs for every poll (ingest only).
"""

from __future__ import annotations

from sqlalchemy import BindParameter, ColumnElement, bindparam, select
from sqlalchemy.ext.asyncio import AsyncConnection

from batchgate.services.common.api_shapes import MESSAGES_ENDPOINT
from batchgate.services.common.db.engine import AnyRow
from batchgate.services.common.db.schema import batches
from batchgate.services.common.states import BatchStatus


def _of_api(message_batch: bool | None) -> ColumnElement[bool] | None:
    """The batches of one public API: Message Batches (True), OpenAI batches (False), or
    both (None); see `batchgate.services.common.api_shapes`."""
    if message_batch is None:
        return None
    return (
        batches.c.endpoint == MESSAGES_ENDPOINT if message_batch else batches.c.endpoint != MESSAGES_ENDPOINT
    )


def visible_conditions(
    project_id: str | BindParameter[str], batch_id: str | BindParameter[str], message_batch: bool | None
) -> list[ColumnElement[bool]]:
    """What `batches.visible` and `visible_with_retries` ask of a batch: `batch_id`, the
    project's, published, not purged, of the API `message_batch` names (None: either)."""
    conditions = [
        batches.c.id == batch_id,
        batches.c.project_id == project_id,
        batches.c.status != BatchStatus.VALIDATING,
        batches.c.purged_at.is_(None),
    ]
    api = _of_api(message_batch)
    return conditions if api is None else [*conditions, api]


_RETRY = batches.alias("retry")
# Built once: aliasing the table and joining it cost more Python than SQLite takes to run it.
_VISIBLE_WITH_RETRIES = (
    select(batches, _RETRY.c.id.label("retry_id"))
    .select_from(
        batches.outerjoin(
            _RETRY, (_RETRY.c.retry_of == batches.c.id) & (_RETRY.c.status != BatchStatus.VALIDATING)
        )
    )
    .where(*visible_conditions(bindparam("p_project"), bindparam("p_batch"), False))
    .order_by(_RETRY.c.id)
)


async def visible_with_retries(
    conn: AsyncConnection, project_id: str, batch_id: str
) -> tuple[AnyRow | None, list[str]]:
    """ingest: `visible` (an OpenAI batch) and its visible retries, oldest first, in one
    statement: a batch read while clients poll it costs one round trip to the database."""
    params = {"p_project": project_id, "p_batch": batch_id}
    rows = (await conn.execute(_VISIBLE_WITH_RETRIES, params)).all()
    return (rows[0] if rows else None), [row.retry_id for row in rows if row.retry_id is not None]
