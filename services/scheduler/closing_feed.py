"""Telling executors at once that a batch stopped running new items (cancel, expiry).

Executors hold items ahead of need; a cancel must stop those before they start, within a
fraction of a second, whichever scheduler replica took the cancel and whichever one each
executor watches. So a stop is announced after its transaction commits: on PostgreSQL as a
NOTIFY on `CLOSING_CHANNEL`, which every replica's listener (this one's included) turns into
a local publish; on SQLite, where one process hosts the only scheduler, by publishing at once.
Each `WatchClosingBatches` stream is one local subscriber. A watcher that was disconnected
catches up through its next heartbeat, which names the stopped batches among those it holds.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

from batchgate.services.common.db import Database
from batchgate.services.common.db.dialect import notify
from batchgate.services.scheduler.queue import Stopped

log = logging.getLogger(__name__)

CLOSING_CHANNEL = "batchgate_closing"
WATCHER_BACKLOG = 10_000  # stops queued for one slow watcher before it is dropped (it reconnects)


def _payload(stopped: Stopped) -> str:
    return f"{int(stopped.hard)}{stopped.batch_id}"


def _parse(payload: str) -> Stopped | None:
    if len(payload) < 2 or payload[0] not in "01":
        return None
    return Stopped(payload[1:], hard=payload[0] == "1")


class ClosingFeed:
    def __init__(self, db: Database) -> None:
        self._db = db
        self._watchers: set[asyncio.Queue[Stopped | None]] = set()

    async def announce(self, stopped: Stopped) -> None:
        """Tell every replica's watchers; call after the stop committed."""
        if not self._db.is_postgres:
            self.publish(stopped)
            return
        try:
            async with self._db.write() as conn:
                await notify(self._db, conn, CLOSING_CHANNEL, _payload(stopped))
        except Exception:  # heartbeats report the stop within a beat
            log.warning("could not announce that batch %s stopped", stopped.batch_id, exc_info=True)

    def on_notify(self, payload: str) -> None:
        """A NOTIFY from any replica (the Listener's callback)."""
        stopped = _parse(payload)
        if stopped is not None:
            self.publish(stopped)

    def publish(self, stopped: Stopped) -> None:
        for queue in list(self._watchers):
            try:
                queue.put_nowait(stopped)
            except asyncio.QueueFull:  # a stuck watcher: end its stream, it reconnects
                self._end(queue)

    async def close(self) -> None:
        """End every watch (the scheduler is stopping: its watchers move to another replica)."""
        for queue in list(self._watchers):
            self._end(queue)

    def _end(self, queue: asyncio.Queue[Stopped | None]) -> None:
        self._watchers.discard(queue)
        if queue.full():
            queue.get_nowait()
        queue.put_nowait(None)

    async def watch(self) -> AsyncIterator[Stopped | None]:
        """Yields None once subscribed, then every stop until the watcher falls too far behind."""
        queue: asyncio.Queue[Stopped | None] = asyncio.Queue(WATCHER_BACKLOG)
        self._watchers.add(queue)
        try:
            yield None
            while (stopped := await queue.get()) is not None:
                yield stopped
        finally:
            self._watchers.discard(queue)
