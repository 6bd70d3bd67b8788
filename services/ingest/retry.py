"""Re-running what did not succeed: POST /v1/batches/{id}/retry.

A retry is an ordinary create (same checks, limits, budgets and idempotency) whose records are
the source batch's items that ended `failed`, `expired` or `cancelled` (or only one of those),
with their custom_ids and request bodies as stored, optionally pointed at another model. The
new batch keeps the source's endpoint, window, name, metadata, priority, webhook and output
expiry, and (unless pointed at another model) its execution, so a retry of a native batch is
native again, through the same create path and checks. It records its source and selection
(`retry_of`, `retry_selection`), which is what makes a retry idempotent for good: asking
again with the same selection answers the batch made the first time. Concurrent first asks
are serialized by an Idempotency-Key of the retry's own (`retry:<source>:<selection>`), so
they too make one batch. Records rejected at create have no body and are not retried (they
would be rejected again).
"""

from __future__ import annotations

from typing import Any

import orjson

from batchgate.services.common import errors
from batchgate.services.common import proto_values as pv
from batchgate.services.common.caller import Principal
from batchgate.services.common.config import Settings
from batchgate.services.common.db import AnyRow, Database, batches, items
from batchgate.services.common.states import BATCH_TERMINAL, ItemState
from batchgate.services.ingest.batch_create import BatchCreator, CreateResult, RetryLineage
from batchgate.services.ingest.lookup import visible_batch
from batchgate.v1 import batches_pb2

SELECTIONS: dict[str, tuple[ItemState, ...]] = {
    "": (ItemState.FAILED, ItemState.EXPIRED, ItemState.CANCELLED),
    ItemState.FAILED: (ItemState.FAILED,),
    ItemState.EXPIRED: (ItemState.EXPIRED,),
    ItemState.CANCELLED: (ItemState.CANCELLED,),
}
IDEMPOTENCY_PREFIX = "retry:"


def selection_name(only: str, model: str) -> str:
    """`<only or all>:<model or nothing>`, e.g. `all:` or `failed:gpt-4o-mini`."""
    return f"{only or 'all'}:{model}"


def retry_records(source: AnyRow, rows: list[AnyRow], model: str) -> list[dict[str, Any]]:
    """Input-file lines for the items `rows` of `source`: their custom_ids and bodies, with
    `model` replacing each body's model when given."""
    records = []
    for row in rows:
        body = orjson.loads(row.body)
        if model and isinstance(body, dict):
            body["model"] = model
        records.append({"custom_id": row.custom_id, "method": "POST", "url": source.endpoint, "body": body})
    return records


def retry_request(source: AnyRow) -> batches_pb2.CreateBatchRequest:
    """The create request of a retry of `source`: its endpoint, window and options."""
    request = batches_pb2.CreateBatchRequest(
        endpoint=source.endpoint,
        completion_window=source.completion_window,
        metadata=orjson.loads(source.metadata) if source.metadata else {},
        webhook_url=source.webhook_url or "",
        name=source.name or "",
    )
    if source.priority_spelling:
        request.priority.CopyFrom(pv.from_python(orjson.loads(source.priority_spelling)))
    if source.output_expires_after_s:
        request.output_expires_after.anchor = "created_at"
        request.output_expires_after.seconds = source.output_expires_after_s
    return request


class BatchRetrier:
    def __init__(self, settings: Settings, db: Database, creator: BatchCreator) -> None:
        self._settings = settings
        self._db = db
        self._creator = creator

    async def retry(self, caller: Principal, request: batches_pb2.RetryBatchRequest) -> CreateResult:
        """The retry batch of `request.batch_id` for the selection, made now or earlier.

        400 `invalid_only` for an unknown selection, 409 `batch_not_ended` while the source
        runs, 400 `model_not_found` for a model not offered for its endpoint, 400
        `nothing_to_retry` when none of its items is in the selection."""
        if request.only not in SELECTIONS:
            raise errors.invalid(
                "'only' must be 'failed', 'expired' or 'cancelled' (or absent: all three).",
                "invalid_only",
                "only",
            )
        if "\x00" in request.model:  # PostgreSQL refuses NUL in text parameters
            raise errors.invalid("'model' must not contain NUL characters.", "invalid_value", "model")
        selection = selection_name(request.only, request.model)
        async with self._db.read() as conn:
            source = await visible_batch(conn, caller.project_id, request.batch_id)
            if source.status not in BATCH_TERMINAL:
                raise errors.conflict(
                    f"Batch '{source.id}' is {source.status}; retry it once it has ended.", "batch_not_ended"
                )
            earlier = await batches.retry_made(conn, source.id, selection)
            rows = [] if earlier else await items.retryable(conn, source.id, SELECTIONS[request.only])
        if earlier is not None:
            async with self._db.read() as conn:
                return CreateResult(await visible_batch(conn, caller.project_id, earlier), replayed=True)
        offered = self._settings.model(request.model) if request.model else None
        if request.model and (offered is None or source.endpoint not in offered.served_endpoints):
            raise errors.invalid(
                f"The model {request.model!r} is not offered by this gateway for {source.endpoint}.",
                "model_not_found",
                "model",
            )
        if not rows:
            wanted = request.only or "failed, expired or cancelled"
            raise errors.invalid(
                f"Batch '{source.id}' has no {wanted} items to retry.", "nothing_to_retry", "batch_id"
            )
        create = retry_request(source)
        if not request.model:  # same model: runs as its source ran (another: that model's default)
            create.execution = source.execution
        return await self._creator.create(
            caller,
            create,
            retry_records(source, rows, request.model),
            idempotency_key=IDEMPOTENCY_PREFIX + f"{source.id}:{selection}",
            lineage=RetryLineage(retry_of=source.id, selection=selection),
        )
