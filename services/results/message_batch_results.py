"""MessageBatchResultsService: the results of an ended Message Batch, as Anthropic streams them.

One JSONL line per request, in input order, `\n` endings, `application/x-jsonl`:
`{"custom_id", "result": {"type": "succeeded", "message": {…}}}`, `{"type": "errored",
"error": {"type": "error", "error": {"type", "message"}, "request_id"}}`, `{"type":
"canceled"}` or `{"type": "expired"}`. A request refused at create is errored with
`invalid_request_error`; an upstream's error answer keeps its type (an OpenAI-compatible
upstream's error is typed by its status, `translate.errors`); a call that never got an answer
is `api_error` (`timeout_error` for a time-out). The message of a success is stored as the
executor made it (the upstream's own, or translated from a chat completion) and spliced in
as bytes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import grpc
import orjson
from google.api import httpbody_pb2

from batchgate.services.common import errors
from batchgate.services.common.caller import principal
from batchgate.services.common.db import Database
from batchgate.services.common.db import message_batches as store
from batchgate.services.common.http_bodies import http_bodies
from batchgate.services.common.jsonl import one_line
from batchgate.services.common.states import BATCH_TERMINAL, ITEM_FINISHED, ItemState
from batchgate.services.common.translate.errors import to_anthropic_error
from batchgate.services.results.finalize import item_pages
from batchgate.v1 import message_batches_pb2, message_batches_pb2_grpc

CONTENT_TYPE = "application/x-jsonl"
TRANSPORT_ERROR_TYPES = {"request_timeout": "timeout_error"}
SIMPLE_RESULTS = {
    ItemState.CANCELLED: b'{"type":"canceled"}',
    ItemState.EXPIRED: b'{"type":"expired"}',
}


def _error(row: Sequence[Any]) -> dict[str, Any]:
    _index, _custom_id, state, status_code, response, request_id, error_code, error_message = row
    if status_code and response is not None:
        try:
            parsed = orjson.loads(response)
        except orjson.JSONDecodeError:
            parsed = response.decode("utf-8", "replace")
        return to_anthropic_error(status_code, parsed, request_id=request_id or None)
    error_type = (
        "invalid_request_error"
        if state == ItemState.REJECTED
        else TRANSPORT_ERROR_TYPES.get(error_code, "api_error")
    )
    body: dict[str, Any] = {"type": "error", "error": {"type": error_type, "message": error_message or ""}}
    if request_id:
        body["request_id"] = request_id
    return body


def result_line(row: Sequence[Any]) -> bytes:
    """The line of one finished item row (`lines.LINE_COLUMNS`), with its newline."""
    custom_id, state, response = row[1], row[2], row[4]
    if state == ItemState.SUCCEEDED and response is not None:
        result = b'{"type":"succeeded","message":' + response + b"}"
    elif state in SIMPLE_RESULTS:
        result = SIMPLE_RESULTS[state]
    else:
        result = orjson.dumps({"type": "errored", "error": _error(row)})
    return one_line(b'{"custom_id":' + orjson.dumps(custom_id) + b',"result":' + result + b"}") + b"\n"


class MessageBatchResultsServicer(message_batches_pb2_grpc.MessageBatchResultsServiceServicer):
    def __init__(self, db: Database) -> None:
        self._db = db

    async def GetMessageBatchResults(
        self, request: message_batches_pb2.GetMessageBatchResultsRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[httpbody_pb2.HttpBody]:
        async with self._db.read() as conn:
            row = await store.find(conn, principal().project_id, request.message_batch_id)
        if row is None:
            raise errors.not_found("message batch", request.message_batch_id[:80], "message_batch_id")
        if row.status not in BATCH_TERMINAL:
            raise errors.conflict(
                f"Message batch '{row.id}' has not ended yet; its results are available once "
                "'processing_status' is 'ended'.",
                "batch_not_ended",
            )
        pages = item_pages(self._db, row.id, ITEM_FINISHED)
        async for body in http_bodies(
            (b"".join(map(result_line, page)) async for page in pages), CONTENT_TYPE
        ):
            yield body
