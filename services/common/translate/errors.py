"""Error answers, both ways: an upstream's error body in one shape → the other shape's.

Anthropic → OpenAI: `{"type": "error", "error": {"type", "message"}}` becomes OpenAI's envelope
`{"error": {"message", "type", "param", "code"}}` with the same HTTP status (`type` from the
status as batchgate's own errors, Anthropic's error type kept as `code`).

OpenAI → Anthropic: OpenAI's envelope (or what vLLM, Ollama and llama.cpp send: a bare
`{"error": "…"}`, or vLLM's `{"object": "error", "message": …}`) becomes Anthropic's error
object, its `type` from the HTTP status as Anthropic types it (`ANTHROPIC_ERROR_TYPES`). An
answer already in Anthropic's shape keeps its type and message. A body in neither shape is
quoted in the message.
"""

from __future__ import annotations

from typing import Any

import orjson

from batchgate.services.common.errors import MAX_MESSAGE_BYTES, ApiError, clip
from batchgate.services.common.translate.shared import JsonObject

ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    408: "timeout_error",
    409: "conflict_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    503: "overloaded_error",
    504: "timeout_error",
    529: "overloaded_error",
}
QUOTED_BODY_CHARS = 1000


def anthropic_error_type(status: int) -> str:
    """Anthropic's error type for an HTTP status (other 4xx: invalid request; else api_error)."""
    if status in ANTHROPIC_ERROR_TYPES:
        return ANTHROPIC_ERROR_TYPES[status]
    return "invalid_request_error" if 400 <= status < 500 else "api_error"


def _quoted(status: int, parsed: Any) -> str:
    return f"Upstream answered HTTP {status}: {orjson.dumps(parsed).decode()[:QUOTED_BODY_CHARS]}"


def to_openai_error(status: int, parsed: Any) -> JsonObject:
    """An Anthropic error answer (`parsed`, with HTTP `status`) in OpenAI's envelope."""
    error = parsed.get("error") if isinstance(parsed, dict) else None
    if isinstance(error, dict) and "param" in error:  # already OpenAI's (an unreadable answer)
        return dict(parsed)
    if isinstance(error, dict) and "message" in error:
        return ApiError(status, str(error["message"]), str(error.get("type") or "upstream_error")).body()
    return ApiError(status, _quoted(status, parsed), "upstream_error").body()


def _anthropic_error(parsed: Any) -> JsonObject | None:
    """The error object of an answer already in Anthropic's shape."""
    if not isinstance(parsed, dict) or parsed.get("type") != "error":
        return None
    error = parsed.get("error")
    if (
        isinstance(error, dict)
        and isinstance(error.get("type"), str)
        and isinstance(error.get("message"), str)
    ):
        return {"type": error["type"], "message": clip(error["message"], MAX_MESSAGE_BYTES)}
    return None


def _openai_message(parsed: Any) -> str | None:
    """The message of an OpenAI-compatible server's error answer."""
    if not isinstance(parsed, dict):
        return None
    error = parsed.get("error")
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return str(error["message"])
    if isinstance(error, str):
        return error
    message = parsed.get("message")
    return message if isinstance(message, str) else None


def to_anthropic_error(status: int, parsed: Any, *, request_id: str | None = None) -> JsonObject:
    """An OpenAI-compatible error answer (`parsed`, with HTTP `status`) as Anthropic's error
    response `{"type": "error", "error": {"type", "message"}}`, with `request_id` when known."""
    error = _anthropic_error(parsed)
    if error is None:
        message = _openai_message(parsed)
        text = message if message is not None else _quoted(status, parsed)
        error = {"type": anthropic_error_type(status), "message": clip(text, MAX_MESSAGE_BYTES)}
    body: JsonObject = {"type": "error", "error": error}
    if request_id is not None:
        body["request_id"] = request_id
    return body
