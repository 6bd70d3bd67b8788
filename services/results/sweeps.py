"""Results' backstop: finalize batches that are due but were missed (a crash, a lost call)."""

from __future__ import annotations

import asyncio
import logging

from batchgate.services.common.db import Database, batches
from batchgate.services.results.finalize import Finalizer

log = logging.getLogger(__name__)


async def due_batches(db: Database) -> list[str]:
    async with db.read() as conn:
        return await batches.due_for_finalize(conn)


async def run_finalize_sweep(db: Database, finalizer: Finalizer, interval_s: float) -> None:
    while True:
        try:
            for batch_id in await due_batches(db):
                await finalizer.finalize(batch_id)
        except Exception:
            log.exception("finalize sweep failed")
        await asyncio.sleep(interval_s)
