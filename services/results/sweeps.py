"""Results' backstop: finalize batches that are due but were missed (a crash, a lost call)."""

from __future__ import annotations

import asyncio
import logging
import time

from sqlalchemy import or_, select

from services.common.db import Database
from services.common.db.schema import batches
from services.common.states import BATCH_RUNNING, BatchStatus
from services.results.finalize import Finalizer

log = logging.getLogger(__name__)


async def due_batches(db: Database) -> list[str]:
    now = time.time()
    async with db.read() as conn:
        rows = (
            (
                await conn.execute(
                    select(batches.c.id).where(
                        or_(
                            (batches.c.status.in_(BATCH_RUNNING))
                            & (batches.c.completed_count + batches.c.failed_count >= batches.c.total),
                            (batches.c.status == BatchStatus.FINALIZING)
                            & (
                                batches.c.finalize_lease_until.is_(None)
                                | (batches.c.finalize_lease_until < now)
                            ),
                        )
                    )
                )
            )
            .scalars()
            .all()
        )
    return list(rows)


async def run_finalize_sweep(db: Database, finalizer: Finalizer, interval_s: float) -> None:
    while True:
        try:
            for batch_id in await due_batches(db):
                await finalizer.finalize(batch_id)
        except Exception:
            log.exception("finalize sweep failed")
        await asyncio.sleep(interval_s)
