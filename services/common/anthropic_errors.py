"""Errors on the Anthropic-shaped routes, in Anthropic's envelope.

Handlers raise the same `ApiError` everywhere; the server wrapper (`grpc_server`) reshapes it
for the methods of `ANTHROPIC_SERVICES`, so an `anthropic` SDK client reads
`{"type": "error", "error": {"type", "message"}}` with Anthropic's error type for the status
(400 invalid_request_error, 401 authentication_error, 402 billing_error, 403 permission_error,
404 not_found_error, 409 conflict_error, 413 request_too_large, 429 rate_limit_error, 500
api_error, 529 overloaded_error). batchgate's own 503 ("try again") becomes Anthropic's 529.
The OpenAI routes keep OpenAI's envelope.
"""

from __future__ import annotations

from typing import Any

from batchgate.services.common.errors import ApiError
from batchgate.services.common.translate.errors import anthropic_error_type

ANTHROPIC_SERVICES = (
    "/batchgate.v1.MessageBatchService/",
    "/batchgate.v1.MessageBatchResultsService/",
)
OVERLOADED = 529
STATUS_FOR_ANTHROPIC = {503: OVERLOADED}
"""batchgate statuses that Anthropic spells differently."""


def speaks_anthropic(method: str) -> bool:
    """Whether the gRPC `method` (`/package.Service/Method`) answers errors in Anthropic's shape."""
    return method.startswith(ANTHROPIC_SERVICES)


class AnthropicError(ApiError):
    """An `ApiError` whose body is Anthropic's envelope; extension fields (e.g. the rejected
    requests of a create) ride inside `error` after `type` and `message`."""

    def body(self) -> dict[str, Any]:
        error: dict[str, Any] = {"type": anthropic_error_type(self.status), "message": self.message}
        error.update(self.extra)
        return {"type": "error", "error": error}


def in_anthropic_shape(exc: ApiError) -> ApiError:
    """`exc` as Anthropic answers it (the same error, Anthropic's status and envelope)."""
    if isinstance(exc, AnthropicError):
        return exc
    status = STATUS_FOR_ANTHROPIC.get(exc.status, exc.status)
    return AnthropicError(status, exc.message, exc.code, exc.param, exc.extra or None)
