"""Which public API a batch belongs to: OpenAI's Batches or Anthropic's Message Batches.

A Message Batch is an ordinary batch (same tables, scheduler, executors and results) whose
`endpoint` is `MESSAGES_ENDPOINT` and whose id starts with `msgbatch_`: its items are stored in
Anthropic's shape (`params` of a Messages request), executors run them natively on an
Anthropic upstream or translated on an OpenAI-compatible one, and it is read only through the
API that created it (`/v1/messages/batches`), never through `/v1/batches`, and vice versa.
"""

from __future__ import annotations

from typing import cast

import orjson

from batchgate.services.common.catalogue import ProviderConfig
from batchgate.services.common.translate.anthropic_to_chat import ChatTarget, MaxTokensField

MESSAGES_ENDPOINT = "/v1/messages"
"""The `endpoint` of a Message Batch (never one of the OpenAI batch endpoints)."""
MESSAGE_BATCH_ID_PREFIX = "msgbatch_"
CHAT_ENDPOINT = "/v1/chat/completions"
"""What a model must serve to run Message Batch requests (Messages is its chat equivalent)."""


def is_message_batch(endpoint: str) -> bool:
    """Whether a batch with this `endpoint` belongs to the Message Batches API."""
    return endpoint == MESSAGES_ENDPOINT


def requested_model(endpoint: str, body: bytes, batch_model: str) -> str:
    """The model an item asks for. Every record of an OpenAI batch names the same model (the
    batch's); a Message Batch may mix models, so its item's own `params.model` counts."""
    if not is_message_batch(endpoint):
        return batch_model
    try:
        model = orjson.loads(body).get("model")
    except (orjson.JSONDecodeError, AttributeError):
        return batch_model
    return model if isinstance(model, str) and model else batch_model


def chat_target(provider: ProviderConfig) -> ChatTarget:
    """What an OpenAI-compatible provider takes beyond OpenAI's parameters, for translated
    Message Batch requests (checked at create, sent by the executor)."""
    return ChatTarget(
        max_tokens_field=cast(MaxTokensField, provider.max_tokens_field),
        vllm_extensions=provider.vllm_extensions,
    )
