"""RecorderService (internal: executors and the scheduler) and ResultsService (public)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import grpc
from google.api import httpbody_pb2
from sqlalchemy import select

from batchgate.internal.v1 import recorder_pb2, recorder_pb2_grpc
from batchgate.v1 import results_pb2, results_pb2_grpc
from services.common import batch_status, errors
from services.common.auth import principal
from services.common.db import Database
from services.common.db.schema import batches
from services.results.finalize import Finalizer, item_pages
from services.results.lines import FAILED_STATES, FINISHED_STATES, SUCCEEDED, render
from services.results.recorder import Recorder

log = logging.getLogger(__name__)

STATE_FILTERS = {"": FINISHED_STATES, "succeeded": (SUCCEEDED,), "failed": FAILED_STATES}


class RecorderServicer(recorder_pb2_grpc.RecorderServiceServicer):
    def __init__(self, recorder: Recorder, finalizer: Finalizer) -> None:
        self._recorder = recorder
        self._finalizer = finalizer
        self._background: set[asyncio.Task[object]] = set()

    async def RecordResults(
        self, request: recorder_pb2.RecordResultsRequest, context: grpc.aio.ServicerContext
    ) -> recorder_pb2.RecordResultsResponse:
        summary = await self._recorder.record(request.outcomes)
        for batch_id in summary.settled:  # finalize without making the executor wait for it
            task = asyncio.create_task(self._finalize_logged(batch_id))
            self._background.add(task)
            task.add_done_callback(self._background.discard)
        return recorder_pb2.RecordResultsResponse(
            accepted=summary.accepted, duplicates=summary.duplicates, refused=summary.refused
        )

    async def _finalize_logged(self, batch_id: str) -> None:
        try:
            await self._finalizer.finalize(batch_id)
        except Exception:
            log.exception("finalizing %s failed; the sweep will retry", batch_id)

    async def FinalizeBatch(
        self, request: recorder_pb2.FinalizeBatchRequest, context: grpc.aio.ServicerContext
    ) -> recorder_pb2.FinalizeBatchResponse:
        status = await self._finalizer.finalize(request.batch_id)
        return recorder_pb2.FinalizeBatchResponse(status=status or "")


class ResultsServicer(results_pb2_grpc.ResultsServiceServicer):
    def __init__(self, db: Database) -> None:
        self._db = db

    async def GetBatchResults(
        self, request: results_pb2.GetBatchResultsRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[httpbody_pb2.HttpBody]:
        if request.state not in STATE_FILTERS:
            raise errors.invalid("'state' must be 'succeeded' or 'failed'.", "invalid_state", "state")
        async with self._db.read() as conn:
            row = (
                await conn.execute(
                    select(batches.c.id, batches.c.status).where(
                        batches.c.id == request.batch_id,
                        batches.c.project_id == principal().project_id,
                        batches.c.status != "validating",
                    )
                )
            ).first()
        if row is None:
            raise errors.not_found("batch", request.batch_id, "batch_id")
        if row.status not in batch_status.TERMINAL and not request.partial:
            raise errors.conflict(
                f"Batch '{row.id}' is {row.status}; pass partial=true for the results so far.",
                "batch_not_finished",
            )
        first = True
        async for page in item_pages(self._db, row.id, STATE_FILTERS[request.state]):
            yield httpbody_pb2.HttpBody(
                content_type="application/jsonl" if first else "",
                data=b"".join(render(row.id, r) for r in page),
            )
            first = False
        if first:
            yield httpbody_pb2.HttpBody(content_type="application/jsonl", data=b"")
