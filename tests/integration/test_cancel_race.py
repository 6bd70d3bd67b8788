"""A cancel that loses the race with the batch's own completion: ingest reads the batch
`in_progress` and asks the scheduler, which finds it ended and moves nothing. The 409 names the
status the batch has then, not the one ingest read before asking (it once said "is
in_progress" of a batch that a GET right after showed `completed`). Ingest's own servicer on a
real database; the scheduler is the race itself, made to happen every time."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import cast

import grpc
import pytest

from batchgate.internal.v1 import scheduler_pb2, scheduler_pb2_grpc, spend_pb2_grpc
from batchgate.services.common import cron
from batchgate.services.common.caller import Principal, current_principal
from batchgate.services.common.db import Database, batches
from batchgate.services.common.errors import ApiError
from batchgate.services.common.loading import load_settings
from batchgate.services.common.states import BatchStatus
from batchgate.services.ingest.batch_create import BatchCreator
from batchgate.services.ingest.batches_servicer import BatchesServicer
from batchgate.services.ingest.idempotency import IdempotencyKeys
from batchgate.services.ingest.template_create import TemplateMaker
from batchgate.v1 import batches_pb2
from tests.integration.seed import insert_running_batch

PROJECT = "proj-a"
BATCH = "batch_race"


class SchedulerFinishingFirst:
    """The scheduler's side of the race: the batch's results are finalized (→ finalizing →
    completed) just before the cancel reaches it, which then does what
    `SchedulerServicer.CancelBatch` does: moves nothing, and answers the status it finds."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def CancelBatch(
        self, request: scheduler_pb2.CancelBatchRequest, **call_options: float
    ) -> scheduler_pb2.CancelBatchResponse:
        async with self._db.write() as conn:
            assert await batches.transition(conn, request.batch_id, BatchStatus.FINALIZING)
            assert await batches.transition(conn, request.batch_id, BatchStatus.COMPLETED)
            assert not await batches.request_cancel(conn, request.batch_id)
            status = await batches.status_of(conn, request.batch_id)
        return scheduler_pb2.CancelBatchResponse(status=status)


@pytest.fixture
async def servicer(db: Database) -> AsyncIterator[BatchesServicer]:
    """Ingest's BatchService, its scheduler the racing one; the results service (spend) is
    never called by a cancel."""
    settings = load_settings(environ={})
    async with grpc.aio.insecure_channel("127.0.0.1:9") as results:
        keys = IdempotencyKeys(db, settings.idempotency_ttl_s, settings.validating_timeout_s)
        creator = BatchCreator(settings, db, spend_pb2_grpc.SpendServiceStub(results), keys)
        scheduler = cast(scheduler_pb2_grpc.SchedulerServiceStub, SchedulerFinishingFirst(db))
        yield BatchesServicer(
            settings, db, scheduler, creator, TemplateMaker(db, creator, cron.schedule_clock(""))
        )


async def test_a_cancel_refused_by_the_scheduler_names_the_status_it_found(
    db: Database, servicer: BatchesServicer
) -> None:
    now = time.time()
    async with db.write() as conn:
        await insert_running_batch(
            conn, BATCH, project_id=PROJECT, total=1, created_at=now, expires_at=now + 3600
        )
    token = current_principal.set(Principal(project_id=PROJECT, key_id="key"))
    try:
        with pytest.raises(ApiError) as caught:
            await servicer.CancelBatch(batches_pb2.CancelBatchRequest(batch_id=BATCH), None)  # type: ignore[arg-type]
    finally:
        current_principal.reset(token)
    assert (caught.value.status, caught.value.code) == (409, "batch_not_cancellable")
    assert caught.value.message == f"Batch '{BATCH}' is completed and can no longer be cancelled."
