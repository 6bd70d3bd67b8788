"""Ingest's periodic housekeeping: interrupted creates, abandoned uploads, expired files and
Idempotency-Keys. Runs every `ingest_sweep_interval_s`."""

from __future__ import annotations

import asyncio
import logging
import time

from batchgate.services.common.config import Settings
from batchgate.services.common.db import Database, batches, files, items, templates
from batchgate.services.common.db.blobs import delete_blob, reclaim_abandoned, reclaim_owned
from batchgate.services.common.states import PauseReason
from batchgate.services.ingest.idempotency import IdempotencyKeys

log = logging.getLogger(__name__)

EXPIRED_PER_SWEEP = 500
# Writers of blobs that a crash can leave incomplete: uploads, and creates (inline input,
# rejections) whose batch `sweep_stale_creates` removes.
BLOB_OWNER_PREFIXES = ("upload:", "create:")


async def delete_expired_files(db: Database) -> int:
    """Reclaim the content of files past their `expires_at` (they already read as 404); the
    templates that read one are paused `input_file_expired` first, while that is still known."""
    async with db.read() as conn:
        rows = await files.expired(conn, EXPIRED_PER_SWEEP)
    for row in rows:
        async with db.write() as conn:
            await templates.pause_reading(
                conn, row.id, PauseReason.INPUT_FILE_EXPIRED, templates.expired_input(row.id)
            )
            await files.delete_file(conn, row.id)
            await delete_blob(conn, row.blob_id)
    return len(rows)


async def sweep_once(settings: Settings, db: Database, idempotency: IdempotencyKeys) -> None:
    await sweep_stale_creates(db, settings.validating_timeout_s)
    for prefix in BLOB_OWNER_PREFIXES:
        await reclaim_abandoned(db, settings.validating_timeout_s, owner_prefix=prefix)
    while await delete_expired_files(db) == EXPIRED_PER_SWEEP:
        pass
    await idempotency.sweep()


async def run_sweeps(settings: Settings, db: Database, idempotency: IdempotencyKeys) -> None:
    while True:
        try:
            await sweep_once(settings, db, idempotency)
        except Exception:
            log.exception("ingest sweep failed")
        await asyncio.sleep(settings.ingest_sweep_interval_s)


async def discard_batch(db: Database, batch: str) -> None:
    """Remove a batch that never left `validating`, with its items and unpublished blobs."""
    async with db.write() as conn:
        if await batches.delete_validating(conn, batch):
            await items.delete_of_batch(conn, batch)
    await reclaim_owned(db, f"create:{batch}")


async def sweep_stale_creates(db: Database, older_than_s: float) -> int:
    """Remove batches a crashed create left in `validating`."""
    async with db.read() as conn:
        stale = await batches.stale_validating(conn, time.time() - older_than_s)
    for batch in stale:
        log.warning("removing batch %s left validating by an interrupted create", batch)
        await discard_batch(db, batch)
    return len(stale)
