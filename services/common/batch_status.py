"""The one way to change a batch's status (the lifecycle itself is `states.BATCH_TRANSITIONS`).

Every change is a conditional UPDATE from the allowed previous statuses, stamping the
matching `<status>_at` column, so concurrent actors (several scheduler or results replicas)
cannot move a batch backwards or twice. `end_status` records how the batch will end
(`cancelled` once cancel is asked, `expired` once the window passed); finalizing applies it.
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncConnection

from services.common.db.schema import batches
from services.common.states import BATCH_TRANSITIONS, BatchStatus

TIMESTAMP_COLUMN = {status: f"{status}_at" for status in BATCH_TRANSITIONS}


async def transition(conn: AsyncConnection, batch_id: str, to: BatchStatus, **values: Any) -> bool:
    """Move `batch_id` to `to` if its current status allows it; returns whether it moved."""
    values = {"status": to, TIMESTAMP_COLUMN[to]: time.time(), **values}
    result = await conn.execute(
        update(batches)
        .where(batches.c.id == batch_id, batches.c.status.in_(BATCH_TRANSITIONS[to]))
        .values(**values)
    )
    return result.rowcount == 1
