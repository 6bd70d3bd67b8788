"""TemplateRunsService.SpawnRun: create the run of a recurring template that is due.

The scheduler calls it for each due time (`next_run_at`) it finds; any ingest replica may
serve it. A run is created through the normal create path, as the key that created the
template, so every check of a create applies at each run (records, budgets). Whatever the
outcome, the due time is served in one conditional update of the template
(`services.common.db.templates.claim_due_time`): the run's, inside the transaction that
publishes it; a refusal's, recording why. A second caller serving the same due time changes
nothing, and its run, if it made one, is discarded unpublished.

Catch-up: the next due time is the expression's first time after the later of the due time
and the caller's clock. After downtime, the one overdue due time makes one run, and the
times missed meanwhile are skipped.

A template pauses itself, with the reason, when its input file was deleted or has expired,
or when the API key that created it (and as which its runs are created) was revoked.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from enum import StrEnum

import grpc

from batchgate.internal.v1 import scheduler_pb2_grpc, templates_pb2, templates_pb2_grpc
from batchgate.services.common import cron, errors
from batchgate.services.common.access_policy import require_scope
from batchgate.services.common.auth import principal_of
from batchgate.services.common.db import AnyRow, Connection, Database, files, projects
from batchgate.services.common.db import templates as store
from batchgate.services.common.states import PauseReason, TemplateStatus
from batchgate.services.ingest import scheduler_calls
from batchgate.services.ingest.batch_create import BatchCreator
from batchgate.services.ingest.metrics import IngestMetrics
from batchgate.services.ingest.template_views import stored_request

log = logging.getLogger(__name__)

# Refusals that end a due time (recorded on the template). Anything else (503: spend could
# not be checked, a lost connection) leaves the due time to the next call. 403 (the key lost
# `batches:write`) and 429 (too many open batches) are the key's state at the due time, like a
# spent budget: retried every second, they made the run late and held up other templates.
FINAL_REFUSALS = frozenset({400, 402, 403, 404, 409, 413, 422, 429})
CREATE_METHOD = "/batchgate.v1.BatchService/CreateBatch"
"""The method a run stands for: its key needs that method's scope, as a create of its own does."""


class RunOutcome(StrEnum):
    """What a due time came to: the `outcome` label of `batchgate.template.runs`."""

    CREATED = "created"
    REFUSED = "refused"
    PAUSED = "paused"


class _AlreadyServed(Exception):
    """Another call served this due time first."""


class _DueTimeClaim:
    """The `RunClaim` of one due time: the create publishes the run only if it takes it."""

    def __init__(self, template_id: str, due_at: float, next_run_at: float) -> None:
        self.template_id = template_id
        self.due_at = due_at
        self.next_run_at = next_run_at

    async def claim(self, conn: Connection) -> None:
        if not await store.claim_due_time(conn, self.template_id, self.due_at, self.next_run_at):
            raise _AlreadyServed(self.template_id)


async def _why_paused(conn: Connection, row: AnyRow, now: float) -> tuple[PauseReason, str] | None:
    """Why the template can make no run any more, if it cannot: (reason, message)."""
    if await projects.key_lapsed(conn, row.api_key_id, now):
        return (
            PauseReason.API_KEY_REVOKED,
            f"The API key {row.api_key_id} that created the template was revoked or has expired.",
        )
    found = await files.expiry(conn, row.project_id, row.input_file_id)
    if found is None:
        return PauseReason.INPUT_FILE_DELETED, f"The input file {row.input_file_id} was deleted."
    if found.expires_at is not None and found.expires_at <= now:
        return PauseReason.INPUT_FILE_EXPIRED, store.expired_input(row.input_file_id)
    return None


class TemplateRunsServicer(templates_pb2_grpc.TemplateRunsServiceServicer):
    def __init__(
        self,
        db: Database,
        creator: BatchCreator,
        scheduler: scheduler_pb2_grpc.SchedulerServiceStub,
        clock: Callable[[], float],
        metrics: IngestMetrics,
    ) -> None:
        self._metrics = metrics
        self._db = db
        self._creator = creator
        self._scheduler = scheduler
        self._clock = clock

    async def SpawnRun(
        self, request: templates_pb2.SpawnRunRequest, context: grpc.aio.ServicerContext
    ) -> templates_pb2.SpawnRunResponse:
        async with self._db.read() as conn:
            row = await store.template_by_id(conn, request.template_id)
            paused = await _why_paused(conn, row, time.time()) if row is not None else None
            key = await projects.key_by_id(conn, row.api_key_id) if row is not None else None
        if row is None or row.status != TemplateStatus.SCHEDULED or row.next_run_at != request.due_at:
            return templates_pb2.SpawnRunResponse(already_done=True)
        next_run = cron.next_time(row.cron, row.cron_timezone, max(request.due_at, request.now))
        if paused is not None:
            reason, message = paused
            return await self._refused(row, request.due_at, next_run, reason, message, pause=reason)
        claim = _DueTimeClaim(row.id, request.due_at, next_run)
        assert key is not None  # a missing key pauses the template above
        caller = principal_of(key)  # the run is checked against the key's policies like any create
        try:
            require_scope(CREATE_METHOD, caller.scopes)
            result = await self._creator.create(caller, stored_request(row), [], run_of=claim)
        except _AlreadyServed:
            return templates_pb2.SpawnRunResponse(already_done=True)
        except errors.ApiError as exc:
            if exc.status not in FINAL_REFUSALS:
                raise
            rejections = exc.extra.get("rejected_records_file_id")  # no_valid_records: the full list
            return await self._refused(
                row, request.due_at, next_run, exc.code or "refused", exc.message, rejections=rejections
            )
        log.info("template %s: run %s for %.0f", row.id, result.batch.id, request.due_at)
        await scheduler_calls.submit(self._scheduler, result.batch.id)
        self._metrics.template_runs.add(1, {"outcome": RunOutcome.CREATED, "error_code": ""})
        return templates_pb2.SpawnRunResponse(batch_id=result.batch.id)

    async def _refused(
        self,
        row: AnyRow,
        due_at: float,
        next_run: float,
        code: str,
        message: str,
        pause: PauseReason | None = None,
        rejections: str | None = None,
    ) -> templates_pb2.SpawnRunResponse:
        """Record on the template why the run due at `due_at` was not created, with the file of
        its rejected records when there is one (it was stored and named nowhere)."""
        error = {"code": code, "message": message}
        if rejections:
            error["rejected_records_file_id"] = rejections
        async with self._db.write() as conn:
            served = await store.claim_due_time(conn, row.id, due_at, next_run, error=error, pause=pause)
        if not served:
            return templates_pb2.SpawnRunResponse(already_done=True)
        log.warning("template %s: no run for %.0f: %s (%s)", row.id, due_at, code, message)
        self._metrics.template_runs.add(
            1, {"outcome": RunOutcome.PAUSED if pause else RunOutcome.REFUSED, "error_code": code}
        )
        return templates_pb2.SpawnRunResponse(refused_code=code)
