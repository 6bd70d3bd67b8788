"""Which public API a batch belongs to: OpenAI's Batches or Anthropic's Message Batches.

A Message Batch is an ordinary batch (same tables, scheduler, executors and results) whose
`endpoint` is `MESSAGES_ENDPOINT` and whose id starts with `msgbatch_`: its items are stored in
Anthropic's shape (`params` of a Messages request), executors run them natively on an
Anthropic upstream or translated on an OpenAI-compatible one, and it is read only through the
API that created it (`/v1/messages/batches`), never through `/v1/batches`, and vice versa.
"""

from __future__ import annotations

MESSAGES_ENDPOINT = "/v1/messages"
"""The `endpoint` of a Message Batch (never one of the OpenAI batch endpoints)."""
MESSAGE_BATCH_ID_PREFIX = "msgbatch_"
CHAT_ENDPOINT = "/v1/chat/completions"
"""What a model must serve to run Message Batch requests (Messages is its chat equivalent)."""


def is_message_batch(endpoint: str) -> bool:
    """Whether a batch with this `endpoint` belongs to the Message Batches API."""
    return endpoint == MESSAGES_ENDPOINT
