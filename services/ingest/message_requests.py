"""How a Message Batch's requests are created: Anthropic's checks behind the create pipeline.

`BatchCreator` (batch_create.py) stores, checks and publishes every batch the same way; what
differs for a Message Batch is said by `message_batch_shape`: `msgbatch_…` ids, the endpoint
marker `MESSAGES_ENDPOINT`, Anthropic's limits, each request stored as given
(`{custom_id, params}`), and `MessageRequestChecker`, which checks each one with
`services.common.translate.message_batches` (custom_id format, `max_tokens`, no stream, a
model this gateway offers, params that translate where the model runs only on
OpenAI-compatible upstreams) and stores its `params` as the item's body. A rejected request's
item keeps the custom_id it was sent with, even an invalid one (`storable_custom_id`), so that
its errored result can be matched to it.
"""

from __future__ import annotations

from typing import Any

import orjson

from batchgate.services.common.api_shapes import CHAT_ENDPOINT, MESSAGES_ENDPOINT, chat_target
from batchgate.services.common.config import Settings
from batchgate.services.common.errors import clip
from batchgate.services.common.ids import message_batch_id
from batchgate.services.common.jsonl import exact, one_line
from batchgate.services.common.loading import MAX_CUSTOM_ID_COLUMN
from batchgate.services.common.translate.message_batches import (
    BatchLimits,
    ModelRoute,
    RejectedRequest,
    RequestChecker,
    Router,
    echoed_custom_id,
)
from batchgate.services.ingest.batch_shape import BatchShape
from batchgate.services.ingest.grpc_records import NonJsonNumber, NonJsonRecord, non_json_number
from batchgate.services.ingest.validation import MAX_MESSAGE_BYTES, Accepted, Rejected

ANTHROPIC_KIND = "anthropic"


def batch_limits(settings: Settings) -> BatchLimits:
    return BatchLimits(
        max_requests=settings.message_batch_max_requests,
        max_body_bytes=settings.message_batch_max_bytes,
        max_request_bytes=settings.max_record_bytes,
    )


def model_router(settings: Settings) -> Router:
    """Where each offered chat model runs: natively where its provider or a fallback's speaks
    Anthropic's Messages API, translated on each OpenAI-compatible one."""

    def route(name: str) -> ModelRoute | None:
        model = settings.model(name)
        if model is None or CHAT_ENDPOINT not in model.served_endpoints:
            return None
        chain = [model, *(m for m in map(settings.model, model.fallbacks) if m is not None)]
        providers = [p for p in map(settings.provider, (m.provider for m in chain)) if p is not None]
        return ModelRoute(
            anthropic=any(p.kind == ANTHROPIC_KIND for p in providers),
            chat_targets=tuple(chat_target(p) for p in providers if p.kind != ANTHROPIC_KIND),
        )

    return route


def storable_custom_id(custom_id: str) -> str:
    """A rejected request's custom_id (as sent, even when invalid) as its item can keep it:
    NUL (which PostgreSQL refuses in text) as U+FFFD, and past the `items.custom_id` column's
    512 characters, cut to end in '...'."""
    text = custom_id.replace("\x00", "\ufffd")
    if len(text) <= MAX_CUSTOM_ID_COLUMN:
        return text
    return text[: MAX_CUSTOM_ID_COLUMN - 3] + "..."


class MessageRequestChecker:
    """The create pipeline's record checker for Message Batch requests (one stored line each)."""

    def __init__(self, settings: Settings, allowed_models: frozenset[str] | None = None) -> None:
        self._checker = RequestChecker(route=model_router(settings), limits=batch_limits(settings))
        self._allowed_models = allowed_models
        """The models the caller's policy allows (None: every offered one)."""
        self._index = 0
        self.model: str | None = None
        """The first accepted request's model (a Message Batch may mix models)."""

    def check(self, raw: bytes) -> Accepted | Rejected:
        try:
            request = orjson.loads(raw)
        except orjson.JSONDecodeError:
            # Lines are written from parsed JSON, or from a native gRPC request holding NaN or
            # ±Infinity (`grpc_records`), which is rejected under its custom_id.
            request = None
            number = non_json_number(raw)
            if number is not None:
                self._index += 1
                return _non_json(number)
        outcome = self._checker.check(self._index, request)
        self._index += 1
        if isinstance(outcome, RejectedRequest):
            return Rejected(outcome.code, outcome.message, storable_custom_id(outcome.custom_id))
        if self._allowed_models is not None and outcome.model not in self._allowed_models:
            return Rejected(
                "model_not_allowed",
                f"The model {outcome.model!r} is not allowed for this API key or project.",
                outcome.custom_id,
            )
        if self.model is None:
            self.model = outcome.model
        return Accepted(
            outcome.custom_id, exact(orjson.dumps(outcome.params)), outcome.model, request=outcome.params
        )


def _non_json(number: NonJsonNumber) -> Rejected:
    """The rejection of a request holding NaN or ±Infinity, under the custom_id it was sent with."""
    custom_id = number.value.get("custom_id") if isinstance(number.value, dict) else None
    message = clip(number.message("request"), MAX_MESSAGE_BYTES)
    return Rejected("invalid_request", message, storable_custom_id(echoed_custom_id(custom_id)))


def _stored_line(index: int, request: Any, endpoint: str) -> bytes:
    """A request stored as given (one JSON cannot represent as Python spells it)."""
    return request.line if isinstance(request, NonJsonRecord) else one_line(orjson.dumps(request))


def message_batch_shape(settings: Settings) -> BatchShape:
    return BatchShape(
        settings=settings,
        endpoints=(MESSAGES_ENDPOINT,),
        new_id=message_batch_id,
        checker=lambda endpoint, allowed: MessageRequestChecker(settings, allowed),
        inline_line=_stored_line,
        windows=(settings.message_batch_window,),
        max_records=settings.message_batch_max_requests,
        max_inline_bytes=settings.message_batch_max_bytes,
        message_batch=True,
    )
