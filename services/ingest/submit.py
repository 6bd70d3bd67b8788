"""Telling the scheduler that a new batch is ready to run."""

from __future__ import annotations

import logging

import grpc

from batchgate.internal.v1 import scheduler_pb2, scheduler_pb2_grpc

log = logging.getLogger(__name__)

SUBMIT_TIMEOUT_S = 5.0


async def submit_batch(scheduler: scheduler_pb2_grpc.SchedulerServiceStub, batch_id: str) -> None:
    """Wake the executors for `batch_id`. Never fails: the batch is stored, and answering an
    error now would make a client retry and create a second one; the scheduler's poll finds
    the batch without the wake-up."""
    try:
        await scheduler.SubmitBatch(
            scheduler_pb2.SubmitBatchRequest(batch_id=batch_id), timeout=SUBMIT_TIMEOUT_S
        )
    except grpc.aio.AioRpcError as exc:
        log.warning(
            "SubmitBatch(%s) failed: %s; the scheduler will pick it up by polling", batch_id, exc.code()
        )
