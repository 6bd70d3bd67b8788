"""BatchService: create, get, list, cancel and update metadata. A create with `cron` makes a
recurring template instead (services.ingest.template_create)."""

from __future__ import annotations

from typing import NamedTuple

import grpc
import orjson

from batchgate.internal.v1 import scheduler_pb2_grpc
from batchgate.services.common import errors, paging, rest_input
from batchgate.services.common.caller import principal
from batchgate.services.common.config import Settings
from batchgate.services.common.db import Database, batches
from batchgate.services.common.ids import BATCH_ID_PREFIX, plausible_id
from batchgate.services.common.states import BATCH_TRANSITIONS, BatchStatus
from batchgate.services.ingest import scheduler_calls
from batchgate.services.ingest.batch_create import BatchCreator, CreateResult
from batchgate.services.ingest.create_checks import check_metadata
from batchgate.services.ingest.dry_run import DryRun
from batchgate.services.ingest.grpc_records import grpc_records
from batchgate.services.ingest.idempotency import REPLAYED_HEADER, key_from_metadata
from batchgate.services.ingest.lookup import visible_batch, visible_batch_and_retries
from batchgate.services.ingest.retry import BatchRetrier
from batchgate.services.ingest.shared_reads import SharedReads
from batchgate.services.ingest.template_create import TemplateMaker
from batchgate.services.ingest.throughput import Paces
from batchgate.services.ingest.views import batch_message, batch_messages, batch_views
from batchgate.v1 import batches_pb2, batches_pb2_grpc

LISTED_STATUSES = tuple(BATCH_TRANSITIONS)  # a batch is listed once it left `validating`


class BatchFilters(NamedTuple):
    """One listing's question: whose batches, which of them, where the page starts and its size."""

    project: str
    status: str
    metadata_key: str
    metadata_value: str | None
    template_id: str
    after: str
    limit: int


class BatchesServicer(batches_pb2_grpc.BatchServiceServicer):
    def __init__(
        self,
        settings: Settings,
        db: Database,
        scheduler: scheduler_pb2_grpc.SchedulerServiceStub,
        creator: BatchCreator,
        templates: TemplateMaker,
    ) -> None:
        self._settings = settings
        self._db = db
        self._scheduler = scheduler
        self._creator = creator
        self._templates = templates
        self._retrier = BatchRetrier(settings, db, creator)
        self._dry_run = DryRun(settings, db, creator.spend)
        self._paces = Paces()
        self._gets: SharedReads[batches_pb2.Batch] = SharedReads()
        self._lists: SharedReads[batches_pb2.ListBatchesResponse] = SharedReads()

    async def CreateBatch(
        self, request: batches_pb2.CreateBatchRequest, context: grpc.aio.ServicerContext
    ) -> batches_pb2.Batch:
        request, json_values = rest_input.decode_body(request, keep_json=("requests",))
        inline = json_values.get("requests") or grpc_records(request.requests)
        request.ClearField("requests")  # the records travel as `inline`
        key = key_from_metadata(context.invocation_metadata() or ())
        if request.HasField("cron") or request.cron_timezone:
            return await self._templates.create(principal(), request, bool(inline), key)
        if request.dry_run:
            return await self._dry_run.answer(principal(), request, inline)
        result = await self._creator.create(principal(), request, inline, key)
        return await self._submit(result, context)

    async def RetryBatch(
        self, request: batches_pb2.RetryBatchRequest, context: grpc.aio.ServicerContext
    ) -> batches_pb2.Batch:
        request, _ = rest_input.decode_body(request)
        return await self._submit(await self._retrier.retry(principal(), request), context)

    async def _submit(self, result: CreateResult, context: grpc.aio.ServicerContext) -> batches_pb2.Batch:
        """Hand a new batch to the scheduler and answer it; a replay is only answered."""
        if result.replayed:
            await context.send_initial_metadata(((REPLAYED_HEADER, "true"),))
            return self._answer(result)
        await scheduler_calls.submit(self._scheduler, result.batch.id)
        return self._answer(result)

    def _answer(self, result: CreateResult) -> batches_pb2.Batch:
        message = batch_message(result.batch)
        message.rejected_records.extend(r.message_proto() for r in result.rejections)
        return message

    async def GetBatch(
        self, request: batches_pb2.GetBatchRequest, context: grpc.aio.ServicerContext
    ) -> batches_pb2.Batch:
        project, ident = principal().project_id, request.batch_id
        return await self._gets.read((project, ident), lambda: self._get(project, ident))

    async def _get(self, project: str, ident: str) -> batches_pb2.Batch:
        async with self._db.read() as conn:
            row, retries = await visible_batch_and_retries(conn, project, ident)
        (message,) = batch_views([row], {row.id: retries}, self._paces)
        return message

    async def ListBatches(
        self, request: batches_pb2.ListBatchesRequest, context: grpc.aio.ServicerContext
    ) -> batches_pb2.ListBatchesResponse:
        limit = paging.page_limit(request, default=20, maximum=100)
        self._check_list_filters(request)
        filters = BatchFilters(
            principal().project_id,
            request.status,
            request.metadata_key,
            request.metadata_value or None,
            request.template_id,
            request.after,
            limit,
        )
        return await self._lists.read(filters, lambda: self._list(filters))

    async def _list(self, filters: BatchFilters) -> batches_pb2.ListBatchesResponse:
        async with self._db.read() as conn:
            if filters.after:
                paging.cursor_id("batch", BATCH_ID_PREFIX, filters.after)
            rows = await batches.page(
                self._db,
                conn,
                filters.project,
                status=filters.status,
                metadata_key=filters.metadata_key,
                metadata_value=filters.metadata_value,
                template_id=filters.template_id,
                after=filters.after,
                limit=filters.limit + 1,
            )
            page = await batch_messages(conn, rows[: filters.limit], self._paces)
        return batches_pb2.ListBatchesResponse(**paging.page_fields(page, len(rows) > filters.limit))

    def _check_list_filters(self, request: batches_pb2.ListBatchesRequest) -> None:
        """The `status`, `metadata_key`/`metadata_value` and `template_id` filters of a listing."""
        if request.status and request.status not in LISTED_STATUSES:
            raise errors.invalid(
                f"'status' must be one of: {', '.join(LISTED_STATUSES)}.", "invalid_status", "status"
            )
        if request.metadata_value and not request.metadata_key:
            raise errors.invalid(
                "'metadata_value' needs 'metadata_key'.", "invalid_metadata_filter", "metadata_value"
            )
        for name in ("metadata_key", "metadata_value"):
            if "\x00" in getattr(request, name):  # PostgreSQL refuses NUL in text parameters
                raise errors.invalid(f"'{name}' must not contain NUL characters.", "invalid_value", name)
        if request.template_id and not plausible_id(request.template_id):
            raise errors.invalid("'template_id' is not a template id.", "invalid_value", "template_id")

    async def CancelBatch(
        self, request: batches_pb2.CancelBatchRequest, context: grpc.aio.ServicerContext
    ) -> batches_pb2.Batch:
        """→ `cancelling`. Asking again while it is being cancelled, or once it is `cancelled`,
        answers the batch as it stands: a cancel whose answer was lost is retried by the SDK,
        and the retry must not fail after the first one took effect. 409 once the batch ended
        otherwise (completed, expired, failed) or is finalizing its results."""
        request, _ = rest_input.decode_body(request)
        project = principal().project_id
        async with self._db.read() as conn:
            found = await visible_batch(conn, project, request.batch_id)
        row = found
        if found.status == BatchStatus.IN_PROGRESS:
            await scheduler_calls.cancel(self._scheduler, found.id)
            async with self._db.read() as conn:
                row = await visible_batch(conn, project, request.batch_id)
        being_cancelled = (
            row.status in (BatchStatus.CANCELLING, BatchStatus.CANCELLED)
            or row.end_status == BatchStatus.CANCELLED
        )
        if not being_cancelled:
            raise errors.conflict(  # `row`, read after the scheduler refused: it may have ended since `found`
                f"Batch '{row.id}' is {row.status} and can no longer be cancelled.", "batch_not_cancellable"
            )
        return batch_message(row)

    async def UpdateBatchMetadata(
        self, request: batches_pb2.UpdateBatchMetadataRequest, context: grpc.aio.ServicerContext
    ) -> batches_pb2.Batch:
        """Replaces the metadata; `{"metadata": {}}` clears it. A body without `metadata` (no
        body, `{}`, or `null`, proto3's "not given") is 400: the map has no presence, and
        reading it as empty silently erased the batch's metadata."""
        typed, _ = rest_input.decode_body(request)
        metadata = dict(typed.metadata)
        if not metadata and not _gives_metadata(request):
            raise errors.invalid("Missing required parameter: 'metadata'.", "missing_parameter", "metadata")
        check_metadata(metadata)
        project = principal().project_id
        async with self._db.write() as conn:
            row = await visible_batch(conn, project, typed.batch_id)
            await batches.set_metadata(conn, row.id, orjson.dumps(metadata).decode() if metadata else None)
            (message,) = await batch_messages(
                conn, [await visible_batch(conn, project, typed.batch_id)], self._paces
            )
            return message


def _gives_metadata(request: batches_pb2.UpdateBatchMetadataRequest) -> bool:
    """Whether the caller sent `metadata` (an empty map included). A REST body tells by its
    key, once `rest_input.decode_body` found it a JSON object; a native gRPC call cannot tell
    an empty map from none, so it keeps its one way to clear the metadata."""
    if not request.HasField(rest_input.BODY_FIELD):
        return True
    body = request.http_body.data
    return bool(body) and orjson.loads(body).get("metadata") is not None
