"""Finalizing a batch: write its output and error files, then end it — once, crash-safe.

1. Claim: `in_progress|cancelling → finalizing` (only when nothing is open), or take over a
   `finalizing` batch whose finalize lease lapsed (the previous writer crashed).
2. Stream the items in input order (keyset pages) into two blobs: successes → output file,
   every failure (upstream errors, timeouts, cancelled, expired, rejected) → error file.
   The lease is renewed as pages go by.
3. One transaction publishes both files, moves `finalizing → completed|expired|cancelled` and
   queues the batch's webhook event. Until then the blobs are incomplete and invisible; a
   crash leaves only garbage that the next finalize of the batch deletes first.

Finalizing must be short (users see `finalizing` with every count at 100%): the next page is
read while the current one is rendered and written, lines are rendered from row tuples, and
the lease is renewed only every third of its life. `python -m bench.finalize` measures it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from sqlalchemy import Row, insert, or_, select, update

from services.common import batch_status
from services.common.config import Settings
from services.common.db import Database
from services.common.db.schema import batches, files, items
from services.common.faults import crash_point
from services.common.ids import file_id
from services.common.storage import BlobWriter, reclaim_owned
from services.results.lines import LINE_COLUMNS, LineRenderer
from services.results.webhook_events import enqueue_batch_event

log = logging.getLogger(__name__)

PAGE_ROWS = 2000


async def item_pages(
    db: Database, batch_id: str, states: tuple[str, ...] | None = None, page_rows: int = PAGE_ROWS
) -> AsyncIterator[list[Row[Any]]]:
    """Yield lists of item rows (LINE_COLUMNS) in input order, one page at a time; the next
    page is read while the caller works on the current one."""

    async def fetch(after: int) -> list[Row[Any]]:
        query = select(*LINE_COLUMNS).where(items.c.batch_id == batch_id, items.c.idx > after)
        if states is not None:
            query = query.where(items.c.state.in_(states))
        async with db.read() as conn:
            return list((await conn.execute(query.order_by(items.c.idx).limit(page_rows))).all())

    pending: asyncio.Task[list[Row[Any]]] | None = asyncio.create_task(fetch(-1))
    try:
        while pending is not None:
            rows = await pending
            pending = asyncio.create_task(fetch(rows[-1].idx)) if len(rows) == page_rows else None
            if rows:
                yield rows
    finally:
        if pending is not None:
            pending.cancel()
            await asyncio.gather(pending, return_exceptions=True)


class Finalizer:
    def __init__(self, settings: Settings, db: Database, on_event: Callable[[], None] | None = None) -> None:
        """`on_event` is called after a batch ended with a webhook event queued."""
        self._settings = settings
        self._db = db
        self._on_event = on_event
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
        renewed = started
        owner = f"finalize:{batch_id}"
        await reclaim_owned(self._db, owner)  # what a crashed finalize of this batch left
        output = BlobWriter(self._db, owner)
        errors_out = BlobWriter(self._db, owner)
        renderer = LineRenderer(batch_id)
        counts = {"output": 0, "error": 0}
        try:
            async for page in item_pages(self._db, batch_id):
                good, bad = renderer.split(page)
                if good:
                    await output.write(b"".join(good))
                if bad:
                    await errors_out.write(b"".join(bad))
                counts["output"] += len(good)
                counts["error"] += len(bad)
                if time.monotonic() - renewed > self._settings.finalize_lease_s / 3:
                    await self._renew(batch_id)
                    renewed = time.monotonic()
            crash_point("results.finalize.before_publish")
            status, event = await self._publish(batch_id, output, errors_out, counts)
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
        if event and self._on_event is not None:
            self._on_event()
        return status

    async def _publish(
        self, batch_id: str, output: BlobWriter, errors_out: BlobWriter, counts: dict[str, int]
    ) -> tuple[str, bool]:
        """Publish the files, end the batch and queue its webhook event, in one transaction.
        Returns the end status and whether an event was queued."""
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
            event = await enqueue_batch_event(conn, batch_id)
        return end, event
