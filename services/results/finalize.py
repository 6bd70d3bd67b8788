"""Finalizing a batch: write its output and error files, then end it — once, crash-safe.

1. Claim: `in_progress|cancelling → finalizing` (only when nothing is open), or take over a
   `finalizing` batch whose finalize lease lapsed (the previous writer crashed).
2. Stream the items in input order (keyset pages) into two blobs: successes → output file,
   every failure (upstream errors, timeouts, cancelled, expired, rejected) → error file.
   The lease is renewed as pages go by.
3. One transaction publishes both files and moves `finalizing → completed|expired|cancelled`.
   Until then the blobs are incomplete and invisible; a crash leaves only garbage that the
   next finalize of the batch deletes first.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from sqlalchemy import insert, or_, select, update

from services.common import batch_status
from services.common.config import Settings
from services.common.db import Database
from services.common.db.schema import batches, files, items
from services.common.faults import crash_point
from services.common.ids import file_id
from services.common.storage import BlobWriter, reclaim_owned
from services.results.lines import SUCCEEDED, render

log = logging.getLogger(__name__)

PAGE_ROWS = 2000
LINE_COLUMNS = (
    items.c.idx,
    items.c.custom_id,
    items.c.state,
    items.c.status_code,
    items.c.response,
    items.c.request_id,
    items.c.error_code,
    items.c.error_message,
)


async def item_pages(
    db: Database, batch_id: str, states: tuple[str, ...] | None = None, page_rows: int = PAGE_ROWS
) -> Any:
    """Yield lists of item rows (LINE_COLUMNS) in input order, one page at a time."""
    last = -1
    while True:
        query = select(*LINE_COLUMNS).where(items.c.batch_id == batch_id, items.c.idx > last)
        if states is not None:
            query = query.where(items.c.state.in_(states))
        async with db.read() as conn:
            rows = (await conn.execute(query.order_by(items.c.idx).limit(page_rows))).all()
        if rows:
            yield rows
        if len(rows) < page_rows:
            return
        last = rows[-1].idx


class Finalizer:
    def __init__(
        self, settings: Settings, db: Database, on_finished: Callable[[str], Awaitable[None]] | None = None
    ) -> None:
        self._settings = settings
        self._db = db
        self._on_finished = on_finished
        self._running: dict[str, asyncio.Task[str | None]] = {}

    async def finalize(self, batch_id: str) -> str | None:
        """Finalize if due; concurrent calls in one process share one run. Returns the status."""
        task = self._running.get(batch_id)
        if task is None:
            task = asyncio.create_task(self._finalize(batch_id))
            self._running[batch_id] = task
            task.add_done_callback(lambda _t: self._running.pop(batch_id, None))
        return await asyncio.shield(task)

    async def _claim(self, batch_id: str) -> bool:
        now = time.time()
        lease_until = now + self._settings.finalize_lease_s
        async with self._db.write() as conn:
            row = (
                await conn.execute(
                    select(
                        batches.c.status,
                        batches.c.total,
                        batches.c.completed_count,
                        batches.c.failed_count,
                        batches.c.finalize_lease_until,
                    ).where(batches.c.id == batch_id)
                )
            ).first()
            if row is None:
                return False
            if row.status in ("in_progress", "cancelling"):
                if row.completed_count + row.failed_count < row.total:
                    return False
                return await batch_status.transition(
                    conn, batch_id, "finalizing", finalize_lease_until=lease_until
                )
            if row.status == "finalizing":
                result = await conn.execute(
                    update(batches)
                    .where(
                        batches.c.id == batch_id,
                        batches.c.status == "finalizing",
                        or_(batches.c.finalize_lease_until.is_(None), batches.c.finalize_lease_until < now),
                    )
                    .values(finalize_lease_until=lease_until)
                )
                return result.rowcount == 1
        return False

    async def _renew(self, batch_id: str) -> None:
        async with self._db.write() as conn:
            await conn.execute(
                update(batches)
                .where(batches.c.id == batch_id, batches.c.status == "finalizing")
                .values(finalize_lease_until=time.time() + self._settings.finalize_lease_s)
            )

    async def _finalize(self, batch_id: str) -> str | None:
        if not await self._claim(batch_id):
            return None
        started = time.monotonic()
        owner = f"finalize:{batch_id}"
        await reclaim_owned(self._db, owner)  # what a crashed finalize of this batch left
        output = BlobWriter(self._db, owner)
        errors_out = BlobWriter(self._db, owner)
        counts = {"output": 0, "error": 0}
        try:
            async for page in item_pages(self._db, batch_id):
                good = [render(batch_id, r) for r in page if r.state == SUCCEEDED]
                bad = [render(batch_id, r) for r in page if r.state != SUCCEEDED]
                if good:
                    await output.write(b"".join(good))
                if bad:
                    await errors_out.write(b"".join(bad))
                counts["output"] += len(good)
                counts["error"] += len(bad)
                await self._renew(batch_id)
            crash_point("results.finalize.before_publish")
            status = await self._publish(batch_id, output, errors_out, counts)
        except BaseException:
            await output.abort()
            await errors_out.abort()
            raise
        log.info(
            "batch %s %s: %d output and %d error lines in %.2fs",
            batch_id,
            status,
            counts["output"],
            counts["error"],
            time.monotonic() - started,
        )
        if status and self._on_finished is not None:
            await self._on_finished(batch_id)
        return status

    async def _publish(
        self, batch_id: str, output: BlobWriter, errors_out: BlobWriter, counts: dict[str, int]
    ) -> str | None:
        now = time.time()
        async with self._db.write() as conn:
            batch = (
                await conn.execute(
                    select(
                        batches.c.project_id, batches.c.end_status, batches.c.output_expires_after_s
                    ).where(batches.c.id == batch_id)
                )
            ).one()
            lifetime = batch.output_expires_after_s or self._settings.file_expiry_days * 86400
            ids: dict[str, str | None] = {"output": None, "error": None}
            for kind, writer in (("output", output), ("error", errors_out)):
                if not counts[kind]:
                    continue
                ids[kind] = file_id()
                blob = await writer.finish(conn)
                await conn.execute(
                    insert(files).values(
                        id=ids[kind],
                        project_id=batch.project_id,
                        filename=f"{batch_id}_{kind}.jsonl",
                        purpose="batch_output",
                        bytes=writer.size,
                        line_count=counts[kind],
                        blob_id=blob,
                        status="processed",
                        created_at=now,
                        expires_at=now + lifetime,
                        batch_id=batch_id,
                    )
                )
            end = batch.end_status or "completed"
            moved = await batch_status.transition(
                conn,
                batch_id,
                end,
                output_file_id=ids["output"],
                error_file_id=ids["error"],
                finalize_lease_until=None,
            )
            if not moved:
                raise RuntimeError(f"batch {batch_id} left finalizing while its files were written")
        return end
