"""MessageBatchService: Anthropic's Message Batches API over batchgate's batches.

A create goes through the same pipeline as `POST /v1/batches` (`BatchCreator` with the
Message Batch shape, `message_requests`), so budgets, Idempotency-Key, per-request rejections
and crash safety are the same; the batch runs at standard priority (Anthropic's API has no
priority) and cancel goes to the scheduler as for any batch.
Errors raised here reach clients in Anthropic's envelope (`services.common.anthropic_errors`).
"""

from __future__ import annotations

from typing import Any

import grpc

from batchgate.internal.v1 import scheduler_pb2_grpc
from batchgate.services.common import errors, paging, rest_input
from batchgate.services.common import proto_values as pv
from batchgate.services.common.api_shapes import MESSAGE_BATCH_ID_PREFIX, MESSAGES_ENDPOINT
from batchgate.services.common.caller import principal
from batchgate.services.common.config import Settings
from batchgate.services.common.db import AnyRow, Database
from batchgate.services.common.db import message_batches as store
from batchgate.services.common.states import BatchStatus
from batchgate.services.common.translate.message_batches import BatchRefused, requests_of
from batchgate.services.ingest import scheduler_calls
from batchgate.services.ingest.batch_create import BatchCreator
from batchgate.services.ingest.grpc_records import grpc_records
from batchgate.services.ingest.idempotency import REPLAYED_HEADER, key_from_metadata
from batchgate.services.ingest.message_batch_views import message_batch, origin
from batchgate.services.ingest.message_requests import batch_limits
from batchgate.v1 import batches_pb2, message_batches_pb2, message_batches_pb2_grpc

MAX_PAGE = 1000
DEFAULT_PAGE = 20


def not_found(batch_id: str) -> errors.ApiError:
    return errors.not_found("message batch", batch_id[:80], "message_batch_id")


class MessageBatchesServicer(message_batches_pb2_grpc.MessageBatchServiceServicer):
    def __init__(
        self,
        settings: Settings,
        db: Database,
        scheduler: scheduler_pb2_grpc.SchedulerServiceStub,
        creator: BatchCreator,
    ) -> None:
        """`creator` makes Message Batches (`message_requests.message_batch_shape`)."""
        self._settings = settings
        self._db = db
        self._scheduler = scheduler
        self._creator = creator

    async def _answer(
        self, row: AnyRow, context: grpc.aio.ServicerContext
    ) -> message_batches_pb2.MessageBatch:
        async with self._db.read() as conn:
            states = await store.item_state_counts(conn, [row])
        return message_batch(
            row, states.get(row.id), origin(self._settings, context.invocation_metadata() or ())
        )

    async def _find(self, batch_id: str) -> AnyRow:
        async with self._db.read() as conn:
            row = await store.find(conn, principal().project_id, batch_id)
        if row is None:
            raise not_found(batch_id)
        return row

    def _requests(self, request: message_batches_pb2.CreateMessageBatchRequest) -> list[Any]:
        """The requests of a create, after the checks of the body as a whole."""
        body_bytes = len(request.http_body.data) if request.HasField("http_body") else request.ByteSize()
        typed, json_values = rest_input.decode_body(request, keep_json=("requests",))
        body: dict[str, Any] = {}
        if "requests" in json_values:
            body["requests"] = json_values["requests"]
        elif typed.requests:
            body["requests"] = grpc_records(typed.requests)
        try:
            return requests_of(body, body_bytes=body_bytes, limits=batch_limits(self._settings))
        except BatchRefused as exc:
            code = "request_too_large" if exc.status == 413 else "invalid_request"
            raise errors.ApiError(exc.status, exc.message, code, "requests") from None

    async def CreateMessageBatch(
        self, request: message_batches_pb2.CreateMessageBatchRequest, context: grpc.aio.ServicerContext
    ) -> message_batches_pb2.MessageBatch:
        inline = self._requests(request)
        create = batches_pb2.CreateBatchRequest(
            endpoint=MESSAGES_ENDPOINT, completion_window=self._settings.message_batch_window
        )
        key = key_from_metadata(context.invocation_metadata() or ())
        result = await self._creator.create(principal(), create, inline, key)
        if result.replayed:
            await context.send_initial_metadata(((REPLAYED_HEADER, "true"),))
        else:
            await scheduler_calls.submit(self._scheduler, result.batch.id)
        return await self._answer(result.batch, context)

    async def GetMessageBatch(
        self, request: message_batches_pb2.GetMessageBatchRequest, context: grpc.aio.ServicerContext
    ) -> message_batches_pb2.MessageBatch:
        return await self._answer(await self._find(request.message_batch_id), context)

    async def ListMessageBatches(
        self, request: message_batches_pb2.ListMessageBatchesRequest, context: grpc.aio.ServicerContext
    ) -> message_batches_pb2.ListMessageBatchesResponse:
        limit = paging.page_limit(request, default=DEFAULT_PAGE, maximum=MAX_PAGE)
        if request.after_id and request.before_id:
            raise errors.invalid("Give 'after_id' or 'before_id', not both.", "invalid_cursor", "before_id")
        project = principal().project_id
        for param, cursor in (("after_id", request.after_id), ("before_id", request.before_id)):
            if cursor:
                paging.cursor_id("message batch", MESSAGE_BATCH_ID_PREFIX, cursor, param, "invalid_cursor")
        async with self._db.read() as conn:
            page = await store.page(
                conn, project, after_id=request.after_id, before_id=request.before_id, limit=limit
            )
            states = await store.item_state_counts(conn, page.rows)
        base = origin(self._settings, context.invocation_metadata() or ())
        data = [message_batch(row, states.get(row.id), base) for row in page.rows]
        return message_batches_pb2.ListMessageBatchesResponse(
            data=data,
            has_more=page.has_more,
            first_id=pv.string_or_null(data[0].id if data else None),
            last_id=pv.string_or_null(data[-1].id if data else None),
        )

    async def CancelMessageBatch(
        self, request: message_batches_pb2.CancelMessageBatchRequest, context: grpc.aio.ServicerContext
    ) -> message_batches_pb2.MessageBatch:
        """Starts cancelling a running batch; a batch already canceling or ended is answered
        as it stands (a retried cancel must not fail once the first took effect)."""
        request, _ = rest_input.decode_body(request)
        row = await self._find(request.message_batch_id)
        if row.status == BatchStatus.IN_PROGRESS:
            await scheduler_calls.cancel(self._scheduler, row.id)
            row = await self._find(request.message_batch_id)
        return await self._answer(row, context)

    async def DeleteMessageBatch(
        self, request: message_batches_pb2.DeleteMessageBatchRequest, context: grpc.aio.ServicerContext
    ) -> message_batches_pb2.DeletedMessageBatch:
        """Deletes an ended batch; one still processing is refused (cancel it first)."""
        project = principal().project_id
        async with self._db.write() as conn:
            row = await store.find(conn, project, request.message_batch_id)
            if row is None:
                raise not_found(request.message_batch_id)
            if not await store.delete_ended(conn, row):
                raise errors.invalid(
                    f"Message batch '{row.id}' is still processing; it can be deleted once it has "
                    "ended (cancel it first to end it sooner).",
                    "batch_not_ended",
                )
        return message_batches_pb2.DeletedMessageBatch(id=row.id, type="message_batch_deleted")
