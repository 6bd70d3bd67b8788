"""Retention: purging what ended batches leave behind, run by the scheduler's maintenance leader
(so once across replicas) every `retention_interval_s`.

Two periods per project (its policy, else the settings), counted from when a batch ended:
- after `retention_days` (default 30; 0 keeps everything) the batch's data goes: its input file
  (unless another batch that still holds its data, or a recurring template, reads it), output,
  error and rejection files
  with their blobs, its items (requests and results) and its webhook deliveries. Its row stays
  as bookkeeping (who, which batch, counts, cost) with `purged_at` set, and its usage events
  stay, so `GET /v1/usage` totals do not change; the batch and its files answer 404.
- after `bookkeeping_days` (default 400, never less than the retention) the row and its usage
  events go too.

Each batch is purged in one transaction, so a purge cut short leaves batches whole or gone.
This is the one place the scheduler writes tables other services own (files, blobs, items'
results, webhook deliveries, usage events): only for batches that ended, which no other
service writes any more.
"""

from __future__ import annotations

import logging
import math
import time

from batchgate.services.common.access_policy import Policy
from batchgate.services.common.config import Settings
from batchgate.services.common.db import (
    Database,
    batch_retention,
    blobs,
    files,
    items,
    projects,
    templates,
    usage,
    webhooks,
)

log = logging.getLogger(__name__)

DAY_S = 86_400.0
BATCHES_PER_PASS = 200
"""Batches purged per project per pass (the next pass goes on)."""


def _days(stored: float | None, setting: float, name: str) -> float:
    """A project's own period, else the setting. A stored period that `projects set-policy`
    refuses (negative, not finite) falls back to the setting: a negative one would make every
    ended batch due at once."""
    if stored is None:
        return setting
    if not (math.isfinite(stored) and stored >= 0):
        log.warning("retention: a project's %s is %r; using the setting's %g instead", name, stored, setting)
        return setting
    return stored


class Retention:
    def __init__(self, db: Database, settings: Settings) -> None:
        self._db = db
        self._settings = settings
        self._last = 0.0

    def now(self) -> float:
        """The clock purges go by (`retention_clock_offset_s` moves it, for tests)."""
        return time.time() + self._settings.retention_clock_offset_s

    def periods(self, policy: Policy) -> tuple[float, float]:
        """(data, bookkeeping) retention in days for a project; 0 keeps."""
        data = _days(policy.retention_days, self._settings.retention_days, "retention_days")
        kept = _days(policy.bookkeeping_days, self._settings.bookkeeping_days, "bookkeeping_days")
        if data == 0:
            return 0.0, 0.0
        return data, 0.0 if kept == 0 else max(kept, data)

    async def due(self) -> None:
        """Purge when `retention_interval_s` has passed since the last pass."""
        if time.monotonic() - self._last < self._settings.retention_interval_s and self._last:
            return
        self._last = time.monotonic()
        await self.purge(self.now())

    async def purge(self, now: float) -> tuple[int, int]:
        """One pass at `now`: (batches whose data was purged, batches forgotten)."""
        async with self._db.read() as conn:
            every = await projects.all_projects(conn)
        purged = forgotten = 0
        for project in every:
            data_days, kept_days = self.periods(Policy.from_json(project.policy))
            if data_days:
                purged += await self._purge_data(project.id, now - data_days * DAY_S, now)
            if kept_days:
                forgotten += await self._forget(project.id, now - kept_days * DAY_S)
        if purged or forgotten:
            log.info("retention: purged the data of %d batches, forgot %d", purged, forgotten)
        return purged, forgotten

    async def _purge_data(self, project_id: str, ended_before: float, now: float) -> int:
        async with self._db.read() as conn:
            ended = await batch_retention.ended_unpurged(conn, project_id, ended_before, BATCHES_PER_PASS)
        for batch in ended:
            async with self._db.write() as conn:
                doomed = list(await files.of_batch(conn, batch.id))
                input_id = batch.input_file_id  # kept while another batch or a template reads it
                read = await batch_retention.input_still_read(conn, input_id, batch.id)
                if not read and not await templates.reads_file(conn, input_id):
                    doomed += [f for f in [await files.get_or_none(conn, input_id)] if f]
                for file in doomed:
                    await files.delete_file(conn, file.id)
                    await blobs.delete_blob(conn, file.blob_id)
                await items.delete_of_batch(conn, batch.id)
                await webhooks.delete_of_batch(conn, batch.id)
                await batch_retention.mark_purged(conn, batch.id, now)
        return len(ended)

    async def _forget(self, project_id: str, ended_before: float) -> int:
        async with self._db.read() as conn:
            old = await batch_retention.purged_before(conn, project_id, ended_before, BATCHES_PER_PASS)
        for batch_id in old:
            async with self._db.write() as conn:
                await usage.delete_of_batch(conn, batch_id)
                await batch_retention.delete_bookkeeping(conn, batch_id)
        return len(old)
