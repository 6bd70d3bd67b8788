"""The clock of recurring batches: find templates whose run is due and have ingest spawn it.

One scheduler replica at a time ticks (the holder of its own advisory lock, as maintenance
does), every `maintenance_interval_s`. It only reads which templates are due; ingest, which
owns templates and the create path, creates each run (`TemplateRunsService.SpawnRun`) and
serves the due time in the same transaction, so a second ticker (a leader that lost its lock
without noticing yet) or a retried call never makes a second run of one due time. A call
that fails leaves the due time as it was: the next tick asks again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import grpc

from batchgate.internal.v1 import templates_pb2, templates_pb2_grpc
from batchgate.services.common.db import Database
from batchgate.services.common.db.dialect import LeaderLock
from batchgate.services.common.db.templates import DueTime, due_templates

log = logging.getLogger(__name__)

CRON_LOCK_KEY = 0x62746370  # "btcp": the recurring-batch ticker's advisory lock
DUE_PER_TICK = 20  # templates spawned at once; more wait for the next tick
SPAWN_TIMEOUT_S = 300.0  # a run's create reads and checks its whole input


class CronTicker:
    def __init__(
        self,
        db: Database,
        spawner: templates_pb2_grpc.TemplateRunsServiceStub,
        interval_s: float,
        clock: Callable[[], float],
    ) -> None:
        self._db = db
        self._spawner = spawner
        self._interval_s = interval_s
        self._clock = clock
        self._leader = LeaderLock(db, CRON_LOCK_KEY, interval_s)

    async def tick(self) -> None:
        now = self._clock()
        async with self._db.read() as conn:
            due = await due_templates(conn, now, DUE_PER_TICK)
        await asyncio.gather(*(self._spawn(one, now) for one in due))

    async def _spawn(self, due: DueTime, now: float) -> None:
        request = templates_pb2.SpawnRunRequest(template_id=due.template_id, due_at=due.due_at, now=now)
        try:
            await self._spawner.SpawnRun(request, timeout=SPAWN_TIMEOUT_S)
        except grpc.aio.AioRpcError as exc:
            log.warning("SpawnRun(%s) failed: %s; retrying at the next tick", due.template_id, exc.code())

    async def run(self) -> None:
        try:
            while True:
                try:
                    if await self._leader.held():
                        await self.tick()
                except Exception:
                    log.exception("recurring batch tick failed")
                await asyncio.sleep(self._interval_s)
        finally:
            await self._leader.release()
