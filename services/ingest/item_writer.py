"""Writing a create's items: checked records become `items` rows, inserted in chunks.

One chunk's insert is in flight while the next is being checked. On PostgreSQL the server
works on it meanwhile; on SQLite the writer's statements run on the event loop's own thread
(`db.engine`), so the insert takes turns with the checking instead of overlapping it (a
create's floor there is SQLite writing the bodies: ~1 s of a 50,000 × 3.8 KB create, see
bench/README.md). At most two chunks are held in memory, whatever the input's size.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from batchgate.services.common.db import Database, items
from batchgate.services.common.states import ItemState
from batchgate.services.ingest.validation import Accepted, Rejected

INSERT_CHUNK = 500


def item_row(
    batch: str, index: int, line: int, outcome: Accepted | Rejected, traceparent: str | None = None
) -> dict[str, Any]:
    """A record's item: queued with its body (and its trace, when traced), or `rejected` with
    the reason (no body)."""
    if isinstance(outcome, Accepted):
        return {
            "batch_id": batch,
            "idx": index,
            "line": line,
            "custom_id": outcome.custom_id,
            "state": ItemState.QUEUED,
            "body": outcome.body,
            "traceparent": traceparent,
            "error_code": None,
            "error_message": None,
            "finished_at": None,
        }
    return {
        "batch_id": batch,
        "idx": index,
        "line": line,
        "custom_id": outcome.custom_id,
        "state": ItemState.REJECTED,
        "body": None,
        "traceparent": None,
        "error_code": outcome.code,
        "error_message": outcome.message,
        "finished_at": time.time(),
    }


class ItemWriter:
    """Buffers rows and inserts them a chunk at a time, one insert in flight.

    Call `close()` once every row is added (it raises what an insert raised); on any failure
    call `abandon()` before cleaning up, so no insert lands after the cleanup.
    """

    def __init__(self, db: Database, chunk: int = INSERT_CHUNK) -> None:
        self._db = db
        self._chunk = chunk
        self._rows: list[dict[str, Any]] = []
        self._in_flight: asyncio.Task[None] | None = None

    async def add(self, row: dict[str, Any]) -> None:
        self._rows.append(row)
        if len(self._rows) >= self._chunk:
            await self._send()

    async def _send(self) -> None:
        await self._wait()
        rows, self._rows = self._rows, []
        self._in_flight = asyncio.create_task(self._insert(rows))

    async def _wait(self) -> None:
        task, self._in_flight = self._in_flight, None
        if task is not None:
            await task

    async def _insert(self, rows: list[dict[str, Any]]) -> None:
        await items.insert_chunk(self._db, rows)

    async def close(self) -> None:
        if self._rows:
            await self._send()
        await self._wait()

    async def abandon(self) -> None:
        """Let the insert in flight end (either way) and drop what is buffered."""
        self._rows = []
        task, self._in_flight = self._in_flight, None
        if task is not None:
            await asyncio.wait([task])  # never raises the task's own error
            if not task.cancelled():
                task.exception()  # retrieved: the failure that matters is the caller's
