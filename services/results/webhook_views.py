"""A batch's webhook deliveries and their attempts as public messages."""

from __future__ import annotations

from collections import defaultdict

import orjson

from batchgate.services.common import proto_values as pv
from batchgate.services.common.db import Database, webhooks
from batchgate.services.common.states import DeliveryStatus
from batchgate.v1 import results_pb2


async def delivery_messages(db: Database, batch_id: str) -> list[results_pb2.WebhookDelivery]:
    """Every webhook event of `batch_id`, oldest first, with every attempt."""
    async with db.read() as conn:
        rows, attempt_rows = await webhooks.of_batch(conn, batch_id)
    attempts: dict[int, list[results_pb2.WebhookAttempt]] = defaultdict(list)
    for a in attempt_rows:
        attempts[a.delivery_id].append(
            results_pb2.WebhookAttempt(
                attempt=a.attempt,
                started_at=int(a.started_at),
                finished_at=pv.number_or_null(a.finished_at),
                status_code=pv.number_or_null(a.status_code),
                error=pv.string_or_null(a.error),
            )
        )
    return [
        results_pb2.WebhookDelivery(
            id=r.event_id,
            object="batch.webhook_delivery",
            type=r.event_type,
            url=r.url,
            status=r.status,
            created_at=int(r.created_at),
            next_attempt_at=pv.number_or_null(
                r.next_attempt_at if r.status == DeliveryStatus.PENDING else None
            ),
            delivered_at=pv.number_or_null(r.delivered_at),
            attempt_count=r.attempts,
            attempts=attempts[r.id],
            payload=pv.from_python(orjson.loads(r.payload)),
        )
        for r in rows
    ]
