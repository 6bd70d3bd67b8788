"""The two calls ingest makes to the scheduler after it changed a batch, for both batch APIs."""

from __future__ import annotations

import logging

import grpc

from batchgate.internal.v1 import scheduler_pb2, scheduler_pb2_grpc
from batchgate.services.common import errors

log = logging.getLogger(__name__)

SUBMIT_TIMEOUT_S = 5
CANCEL_TIMEOUT_S = 10


async def submit(scheduler: scheduler_pb2_grpc.SchedulerServiceStub, batch_id: str) -> None:
    """Wake the scheduler for a new batch. A failure is only logged: the batch is stored, and
    answering an error would make the SDK retry and create a second one; the scheduler's poll
    finds the batch without the wake-up."""
    try:
        await scheduler.SubmitBatch(
            scheduler_pb2.SubmitBatchRequest(batch_id=batch_id), timeout=SUBMIT_TIMEOUT_S
        )
    except grpc.aio.AioRpcError as exc:
        log.warning(
            "SubmitBatch(%s) failed: %s; the scheduler will pick it up by polling", batch_id, exc.code()
        )


async def cancel(scheduler: scheduler_pb2_grpc.SchedulerServiceStub, batch_id: str) -> None:
    """Ask the scheduler to cancel a running batch; 503 when it cannot be reached (cancelling
    twice is harmless, so the client may retry)."""
    try:
        await scheduler.CancelBatch(
            scheduler_pb2.CancelBatchRequest(batch_id=batch_id), timeout=CANCEL_TIMEOUT_S
        )
    except grpc.aio.AioRpcError as exc:
        raise errors.ApiError(
            503, "The scheduler could not be reached; retry the cancel.", "scheduler_unavailable"
        ) from exc
