"""Batch events for webhooks: what is sent, how it is signed, and queuing it with the batch's end.

An event is queued in the same transaction that ends the batch (`enqueue_batch_event`), so a
batch never ends without its event and never gets two; `webhook_delivery` sends it later.
Every attempt is signed afresh with the project's `webhook_secret`:

    Batchgate-Timestamp: <unix seconds>
    Batchgate-Signature: v1=<hex HMAC-SHA256(secret, "<timestamp>." + body)>

so a receiver checks both authenticity and freshness (README: Webhooks).
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

import orjson

from batchgate.services.common.db import AnyRow, Connection, batches, webhooks
from batchgate.services.common.ids import new_id
from batchgate.services.common.states import BATCH_TERMINAL

EVENT_OBJECT = "batch.event"
EVENT_ID_HEADER = "Batchgate-Event-Id"
TIMESTAMP_HEADER = "Batchgate-Timestamp"
SIGNATURE_HEADER = "Batchgate-Signature"
SIGNATURE_VERSION = "v1"


def _stamp(value: float | None) -> int | None:
    return None if value is None else int(value)


def event_payload(batch: AnyRow, event_id: str) -> dict[str, Any]:
    """The JSON body of the event that `batch` (a full batches row) ended."""
    return {
        "id": batch.id,
        "object": EVENT_OBJECT,
        "type": f"batch.{batch.status}",
        "event_id": event_id,
        "status": batch.status,
        "endpoint": batch.endpoint,
        "model": batch.model,
        "request_counts": {
            "total": batch.total,
            "completed": batch.completed_count,
            "failed": batch.failed_count,
        },
        "output_file_id": batch.output_file_id,
        "error_file_id": batch.error_file_id,
        "rejected_records_file_id": batch.rejected_file_id,
        "created_at": _stamp(batch.created_at),
        "completed_at": _stamp(batch.completed_at),
        "expired_at": _stamp(batch.expired_at),
        "cancelled_at": _stamp(batch.cancelled_at),
        "failed_at": _stamp(batch.failed_at),
        "metadata": orjson.loads(batch.metadata) if batch.metadata else None,
        "usage": {
            "input_tokens": batch.input_tokens,
            "input_tokens_details": {"cached_tokens": batch.cached_tokens},
            "output_tokens": batch.output_tokens,
            "output_tokens_details": {"reasoning_tokens": batch.reasoning_tokens},
            "total_tokens": batch.input_tokens + batch.output_tokens,
        },
        "cost": {"currency": "usd", "amount": batch.cost_usd, "discount": batch.discount},
    }


async def enqueue_batch_event(conn: Connection, batch_id: str) -> bool:
    """Queue the end event of `batch_id` if it has a webhook; call in the ending transaction."""
    batch = await batches.get(conn, batch_id)
    if not batch.webhook_url or batch.status not in BATCH_TERMINAL:
        return False
    event_id = new_id("evt_")
    await webhooks.enqueue(
        conn,
        event_id=event_id,
        batch_id=batch.id,
        project_id=batch.project_id,
        url=batch.webhook_url,
        event_type=f"batch.{batch.status}",
        payload=orjson.dumps(event_payload(batch, event_id)).decode(),
    )
    return True


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """The `Batchgate-Signature` value for `body` sent at `timestamp`."""
    digest = hmac.new(secret.encode(), b"%d." % timestamp + body, hashlib.sha256).hexdigest()
    return f"{SIGNATURE_VERSION}={digest}"


def signed_headers(secret: str, event_id: str, body: bytes, timestamp: int) -> dict[str, str]:
    return {
        "content-type": "application/json",
        EVENT_ID_HEADER: event_id,
        TIMESTAMP_HEADER: str(timestamp),
        SIGNATURE_HEADER: signature(secret, timestamp, body),
    }
