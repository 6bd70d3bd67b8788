"""Finalizing a batch: write its output and error files, then end it — once, crash-safe.

1. Claim: `in_progress|cancelling → finalizing` (only when nothing is open), or take over a
   `finalizing` batch whose finalize lease lapsed (the previous writer crashed). The claim is
   renewed every third of `finalize_lease_s` for as long as the finalize runs, so a dead
   writer's claim is taken over within one lease (5 s by default).
2. Stream the items in input order (keyset pages) into two blobs: successes → output file,
   every failure (upstream errors, timeouts, cancelled, expired, rejected) → error file.
3. One transaction publishes both files, moves `finalizing → completed|expired|cancelled` and
   queues the batch's webhook event. Until then the blobs are incomplete and invisible; a
   crash leaves only garbage that the next finalize of the batch deletes first.

A write that fails on the database (a lost connection) is tried again at once, a few times,
while the claim is still ours; if it keeps failing the claim is given up, so the sweep takes
the batch again at its next round rather than a lease later.

Finalizing must be short (users see `finalizing` with every count at 100%): the next page is
read while the current one is rendered and written, lines are rendered from row tuples, and
the lease is renewed only every third of its life. `python -m bench.finalize` measures it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from batchgate.services.common import telemetry
from batchgate.services.common.api_shapes import is_message_batch
from batchgate.services.common.config import Settings
from batchgate.services.common.db import AnyRow, Database, DatabaseError, batches, files, items
from batchgate.services.common.db.blobs import BlobWriter, reclaim_owned
from batchgate.services.common.faults import crash_point
from batchgate.services.common.ids import file_id
from batchgate.services.common.states import BatchStatus, FilePurpose, ItemState
from batchgate.services.results.lines import LineRenderer
from batchgate.services.results.metrics import ResultsMetrics, error_code
from batchgate.services.results.webhook_events import enqueue_batch_event

log = logging.getLogger(__name__)

PAGE_ROWS = 2000
WRITE_TRIES = 4  # a write failing on the database is tried this often while the claim is ours
WRITE_RETRY_S = 0.2  # times the try number
SPANS_PER_TURN = 500  # write spans made between two yields to the event loop


@dataclass(frozen=True)
class _Claimed:
    created_at: float
    traceparent: str | None
    """The create call's trace (the finalize span joins it)."""
    message_batch: bool = False
    """A Message Batch: its results stream from the items, so no output and error files."""


async def item_pages(
    db: Database,
    batch_id: str,
    states: tuple[str, ...] | None = None,
    page_rows: int = PAGE_ROWS,
    with_body: bool = False,
) -> AsyncIterator[list[AnyRow]]:
    """Yield lists of item rows (LINE_COLUMNS, plus the request body when `with_body`) in
    input order, one page at a time; the next page is read while the caller works on the
    current one."""

    async def fetch(after: int) -> list[AnyRow]:
        async with db.read() as conn:
            return await items.line_page(conn, batch_id, after, states, page_rows, with_body)

    pending: asyncio.Task[list[AnyRow]] | None = asyncio.create_task(fetch(-1))
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
    def __init__(
        self,
        settings: Settings,
        db: Database,
        on_event: Callable[[], None] | None = None,
        metrics: ResultsMetrics | None = None,
    ) -> None:
        """`on_event` is called after a batch ended with a webhook event queued."""
        self._settings = settings
        self._db = db
        self._on_event = on_event
        self._metrics = metrics or ResultsMetrics()
        self._running: dict[str, asyncio.Task[str | None]] = {}

    async def finalize(self, batch_id: str) -> str | None:
        """Finalize if due; concurrent calls in one process share one run. Returns the status."""
        task = self._running.get(batch_id)
        if task is None:
            task = asyncio.create_task(self._finalize(batch_id))
            self._running[batch_id] = task
            task.add_done_callback(lambda _t: self._running.pop(batch_id, None))
        return await asyncio.shield(task)

    async def _claim(self, batch_id: str) -> _Claimed | None:
        lease_until = time.time() + self._settings.finalize_lease_s
        async with self._db.write() as conn:
            row = await batches.claim_finalize(conn, batch_id, lease_until)
        return (
            None if row is None else _Claimed(row.created_at, row.traceparent, is_message_batch(row.endpoint))
        )

    async def _renew(self, batch_id: str, until: float | None) -> None:
        async with self._db.write() as conn:
            await batches.renew_finalize(conn, batch_id, until)

    async def _keep_claim(self, batch_id: str) -> None:
        """Renew the claim every third of the lease while the finalize runs."""
        every = self._settings.finalize_lease_s / 3
        while True:
            await asyncio.sleep(every)
            try:
                await self._renew(batch_id, time.time() + self._settings.finalize_lease_s)
            except (DatabaseError, OSError):
                log.warning("batch %s: renewing the finalize claim failed", batch_id, exc_info=True)

    async def _finalize(self, batch_id: str) -> str | None:
        claimed = await self._claim(batch_id)
        if claimed is None:
            return None
        keeper = asyncio.create_task(self._keep_claim(batch_id))
        try:
            with telemetry.child_span(
                "results", "batchgate.batch.finalize", claimed.traceparent, {"batch.id": batch_id}
            ) as span:
                status = await self._write_retrying(batch_id, claimed)
                if span is not None:
                    span.set_attribute("batchgate.batch.status", status)
                return status
        finally:
            keeper.cancel()
            await asyncio.gather(keeper, return_exceptions=True)

    async def _write_retrying(self, batch_id: str, claimed: _Claimed) -> str:
        attempt = 1
        while True:
            try:
                return await self._write(batch_id, claimed)
            except (DatabaseError, OSError) as exc:
                if attempt == WRITE_TRIES:
                    with contextlib.suppress(DatabaseError, OSError):  # the sweep's next round takes it
                        await self._renew(batch_id, None)
                    raise
                log.warning("batch %s: finalize failed (%r); trying again", batch_id, exc)
                await asyncio.sleep(WRITE_RETRY_S * attempt)
                attempt += 1

    async def _render(
        self, batch_id: str, output: BlobWriter, errors_out: BlobWriter, counts: dict[str, int]
    ) -> None:
        """Every item's line into the output or the error file, counted in `counts`."""
        renderer = LineRenderer(batch_id)
        async for page in item_pages(self._db, batch_id):
            good, bad = renderer.split(page)
            if good:
                await output.write(b"".join(good))
            if bad:
                await errors_out.write(b"".join(bad))
            counts["output"] += len(good)
            counts["error"] += len(bad)

    async def _write(self, batch_id: str, claimed: _Claimed) -> str:
        started = time.monotonic()
        started_ns = time.time_ns()
        owner = f"finalize:{batch_id}"
        await reclaim_owned(self._db, owner)  # what a crashed finalize of this batch left
        output = BlobWriter(self._db, owner)
        errors_out = BlobWriter(self._db, owner)
        counts = {"output": 0, "error": 0}
        try:
            if not claimed.message_batch:
                await self._render(batch_id, output, errors_out, counts)
            crash_point("results.finalize.before_publish")
            status, event = await self._publish(batch_id, output, errors_out, counts)
        except BaseException:
            await output.abort()
            await errors_out.abort()
            raise
        seconds = time.monotonic() - started
        log.info(
            "batch %s %s: %d output and %d error lines in %.2fs",
            batch_id,
            status,
            counts["output"],
            counts["error"],
            seconds,
            extra={"batch_id": batch_id},
        )
        if event and self._on_event is not None:
            self._on_event()
        self._metrics.finalize_duration.record(seconds)
        self._metrics.batch_duration.record(max(time.time() - claimed.created_at, 0.0), {"status": status})
        try:
            self._metrics.finished(await self._closed_outcomes(batch_id))
            if telemetry.tracing("results"):
                await self._write_spans(batch_id, started_ns)
        except Exception:  # the batch has ended: telemetry must not make its finalize look failed
            log.warning("batch %s: telemetry after finalize failed", batch_id, exc_info=True)
        return status

    async def _closed_outcomes(self, batch_id: str) -> Counter[tuple[str, str]]:
        """The batch's items that ended without an executor (cancelled, expired, rejected), by
        (state, error code): counted once, when the batch ends."""
        async with self._db.read() as conn:
            rows = await items.closed_counts(conn, batch_id)
        return Counter({(state, error_code(code, None)): count for state, code, count in rows})

    async def _write_spans(self, batch_id: str, started_ns: int) -> None:
        """The line written to the output or error file, as a span in the item's trace, for
        each traced item that has no record span (one that ended without an executor's
        outcome: cancelled, expired, or run by the provider's batch API). A recorded item's
        record span says where its line went (`batchgate.outcome`): one span fewer per item."""
        async with self._db.read() as conn:
            rows = await items.traced_unrecorded(conn, batch_id)
        for number, row in enumerate(rows, 1):
            telemetry.record_child_span(
                "results",
                "batchgate.item.write",
                row.traceparent,
                {
                    **telemetry.item_attributes(batch_id, row.idx, row.custom_id),
                    "batchgate.file": "output" if row.state == ItemState.SUCCEEDED else "error",
                },
                start_ns=started_ns,
            )
            if number % SPANS_PER_TURN == 0:
                await asyncio.sleep(0)

    async def _publish(
        self, batch_id: str, output: BlobWriter, errors_out: BlobWriter, counts: dict[str, int]
    ) -> tuple[str, bool]:
        """Publish the files, end the batch and queue its webhook event, in one transaction.
        Returns the end status and whether an event was queued."""
        now = time.time()
        async with self._db.write() as conn:
            batch = await batches.get(conn, batch_id)
            lifetime = batch.output_expires_after_s or self._settings.file_expiry_days * 86400
            ids: dict[str, str | None] = {"output": None, "error": None}
            for kind, writer in (("output", output), ("error", errors_out)):
                if not counts[kind]:
                    continue
                ids[kind] = new_file = file_id()
                blob = await writer.finish(conn)
                await files.insert_file(
                    conn,
                    file_id=new_file,
                    project_id=batch.project_id,
                    filename=f"{batch_id}_{kind}.jsonl",
                    purpose=FilePurpose.BATCH_OUTPUT,
                    blob_id=blob,
                    size=writer.size,
                    line_count=counts[kind],
                    created_at=now,
                    expires_at=now + lifetime,
                    batch_id=batch_id,
                )
            end = BatchStatus(batch.end_status or BatchStatus.COMPLETED)
            moved = await batches.transition(
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
