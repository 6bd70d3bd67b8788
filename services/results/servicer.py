"""RecorderService (internal: executors and the scheduler) and ResultsService (public: results,
usage, webhook deliveries)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import grpc
from google.api import httpbody_pb2

from batchgate.internal.v1 import recorder_pb2, recorder_pb2_grpc
from batchgate.services.common import errors, paging
from batchgate.services.common.caller import principal
from batchgate.services.common.db import AnyRow, Database, batches
from batchgate.services.common.db.usage import UsageFilter
from batchgate.services.common.http_bodies import http_bodies
from batchgate.services.common.ids import plausible_id
from batchgate.services.common.states import BATCH_TERMINAL, ITEM_FAILED, ITEM_FINISHED, Execution, ItemState
from batchgate.services.results.finalize import Finalizer, item_pages
from batchgate.services.results.lines import LineRenderer
from batchgate.services.results.recorder import Recorder
from batchgate.services.results.result_formats import FORMATS, MERGED, MergedRenderer, SimpleRenderer
from batchgate.services.results.usage import (
    EVENTS_PAGE_DEFAULT,
    EVENTS_PAGE_MAX,
    check_batch,
    event_message,
    group_message,
    parse_group_by,
    usage_event_page,
    usage_groups,
)
from batchgate.services.results.webhook_views import delivery_messages
from batchgate.v1 import results_pb2, results_pb2_grpc

log = logging.getLogger(__name__)

STATE_FILTERS = {
    "": ITEM_FINISHED,
    ItemState.SUCCEEDED: (ItemState.SUCCEEDED,),
    ItemState.FAILED: ITEM_FAILED,
}


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


async def visible_batch(db: Database, batch_id: str) -> AnyRow:
    """The caller's OpenAI batch (id, status), or 404 (unknown, another project's, or a Message
    Batch, which is read through its own API)."""
    if not plausible_id(batch_id):
        raise errors.not_found("batch", batch_id[:80], "batch_id")
    async with db.read() as conn:
        row = await batches.visible(conn, principal().project_id, batch_id, message_batch=False)
    if row is None:
        raise errors.not_found("batch", batch_id, "batch_id")
    return row


def result_renderer(result_format: str, batch: AnyRow) -> LineRenderer | MergedRenderer | SimpleRenderer:
    """What renders a page of the batch's item rows in `result_format` (checked)."""
    if not result_format:
        return LineRenderer(batch.id)
    return MergedRenderer(batch.id) if result_format == MERGED else SimpleRenderer(batch.endpoint)


class ResultsServicer(results_pb2_grpc.ResultsServiceServicer):
    def __init__(self, db: Database) -> None:
        self._db = db

    async def GetBatchResults(
        self, request: results_pb2.GetBatchResultsRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[httpbody_pb2.HttpBody]:
        if request.state not in STATE_FILTERS:
            raise errors.invalid("'state' must be 'succeeded' or 'failed'.", "invalid_state", "state")
        if request.format not in FORMATS:
            raise errors.invalid("'format' must be 'merged' or 'simple'.", "invalid_format", "format")
        row = await visible_batch(self._db, request.batch_id)
        if row.status not in BATCH_TERMINAL and not request.partial:
            raise errors.conflict(
                f"Batch '{row.id}' is {row.status}; pass partial=true for the results so far.",
                "batch_not_finished",
            )
        if row.status not in BATCH_TERMINAL and row.execution == Execution.NATIVE:
            raise errors.conflict(
                f"Batch '{row.id}' runs on its provider's batch API: its results come when it ends.",
                "batch_not_finished",
            )
        renderer = result_renderer(request.format, row)
        pages = item_pages(self._db, row.id, STATE_FILTERS[request.state], with_body=bool(request.format))
        async for body in http_bodies((renderer.lines(page) async for page in pages), "application/jsonl"):
            yield body

    async def _usage_filter(self, request: Any) -> UsageFilter:
        if request.batch_id:
            await check_batch(self._db, principal().project_id, request.batch_id)
        return UsageFilter(
            project_id=principal().project_id,
            start_time=request.start_time,
            end_time=request.end_time,
            batch_id=request.batch_id,
            model=request.model,
            api_key_id=request.api_key_id,
        )

    async def GetUsage(
        self, request: results_pb2.GetUsageRequest, context: grpc.aio.ServicerContext
    ) -> results_pb2.GetUsageResponse:
        group_by = parse_group_by(request.group_by)
        groups = await usage_groups(self._db, await self._usage_filter(request), group_by)
        return results_pb2.GetUsageResponse(object="list", data=[group_message(g, group_by) for g in groups])

    async def ListUsageEvents(
        self, request: results_pb2.ListUsageEventsRequest, context: grpc.aio.ServicerContext
    ) -> results_pb2.ListUsageEventsResponse:
        limit = paging.page_limit(request, default=EVENTS_PAGE_DEFAULT, maximum=EVENTS_PAGE_MAX)
        rows, has_more = await usage_event_page(
            self._db, await self._usage_filter(request), request.after, limit
        )
        page = [event_message(r) for r in rows]
        return results_pb2.ListUsageEventsResponse(**paging.page_fields(page, has_more))

    async def ListWebhookDeliveries(
        self, request: results_pb2.ListWebhookDeliveriesRequest, context: grpc.aio.ServicerContext
    ) -> results_pb2.ListWebhookDeliveriesResponse:
        batch = await visible_batch(self._db, request.batch_id)
        return results_pb2.ListWebhookDeliveriesResponse(
            object="list", data=await delivery_messages(self._db, batch.id)
        )
