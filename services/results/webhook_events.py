"""Batch events for webhooks, as OpenAI sends them: what is sent, how it is signed, and queuing
it with the batch's end.

An event is queued in the same transaction that ends the batch (`enqueue_batch_event`), so a
batch never ends without its event and never gets two; `webhook_delivery` sends it later.
The body and headers follow the Standard Webhooks specification, as OpenAI's own webhooks do,
so `openai.OpenAI().webhooks.unwrap(...)` and the `standardwebhooks` library verify them:

    {"id": "evt_…", "object": "event", "type": "batch.completed", "created_at": <unix s>,
     "data": {"id": "batch_…"}}

    webhook-id: evt_…                      (the same on every attempt: receivers deduplicate)
    webhook-timestamp: <unix seconds of this attempt>
    webhook-signature: v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">

keyed with the project's `whsec_…` secret (base64 after the prefix). Every attempt is signed
afresh, so a receiver checks freshness too.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import orjson
from standardwebhooks import Webhook

from batchgate.services.common.db import AnyRow, Connection, batches, webhooks
from batchgate.services.common.ids import new_id
from batchgate.services.common.states import BATCH_TERMINAL

EVENT_OBJECT = "event"
ID_HEADER = "webhook-id"
TIMESTAMP_HEADER = "webhook-timestamp"
SIGNATURE_HEADER = "webhook-signature"


def event_type(status: str) -> str:
    """`batch.completed`, `batch.failed`, `batch.cancelled` or `batch.expired`."""
    return f"batch.{status}"


def event_payload(batch: AnyRow, event_id: str, created_at: float) -> dict[str, Any]:
    """The JSON body of the event that `batch` (a batches row) ended: OpenAI's event object,
    which names the batch; receivers fetch it for the details."""
    return {
        "id": event_id,
        "object": EVENT_OBJECT,
        "type": event_type(batch.status),
        "created_at": int(created_at),
        "data": {"id": batch.id},
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
        event_type=event_type(batch.status),
        payload=orjson.dumps(event_payload(batch, event_id, time.time())).decode(),
    )
    return True


def signed_headers(secret: str, event_id: str, body: bytes, timestamp: int) -> dict[str, str]:
    """The Standard Webhooks headers of one attempt to send `body` at `timestamp`."""
    sent_at = datetime.fromtimestamp(timestamp, tz=UTC)
    return {
        "content-type": "application/json",
        ID_HEADER: event_id,
        TIMESTAMP_HEADER: str(timestamp),
        SIGNATURE_HEADER: Webhook(secret).sign(event_id, sent_at, body.decode()),
    }
