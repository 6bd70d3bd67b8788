"""OpenAI-shaped errors and how they cross gRPC to Envoy.

A handler raises `ApiError`; the server wrapper (`batchgate.services.common.grpc_server`) aborts the
call with the matching gRPC status plus two trailing metadata entries that Envoy's Lua filter
turns into the HTTP answer: `x-oai-status` (HTTP status) and `x-oai-error` (the JSON body
`{"error": {"message", "type", "param", "code"}}`). Native gRPC clients read the same
metadata, or just the status code.
"""

from __future__ import annotations

import json
from typing import Any

import grpc

# HTTP status → (gRPC code, OpenAI error type)
_BY_STATUS: dict[int, tuple[grpc.StatusCode, str]] = {
    400: (grpc.StatusCode.INVALID_ARGUMENT, "invalid_request_error"),
    401: (grpc.StatusCode.UNAUTHENTICATED, "authentication_error"),
    402: (grpc.StatusCode.FAILED_PRECONDITION, "billing_error"),
    403: (grpc.StatusCode.PERMISSION_DENIED, "permission_error"),
    404: (grpc.StatusCode.NOT_FOUND, "invalid_request_error"),
    409: (grpc.StatusCode.FAILED_PRECONDITION, "invalid_request_error"),
    413: (grpc.StatusCode.OUT_OF_RANGE, "invalid_request_error"),
    422: (grpc.StatusCode.INVALID_ARGUMENT, "invalid_request_error"),
    429: (grpc.StatusCode.RESOURCE_EXHAUSTED, "rate_limit_error"),
    500: (grpc.StatusCode.INTERNAL, "server_error"),
    503: (grpc.StatusCode.UNAVAILABLE, "server_error"),
    529: (grpc.StatusCode.UNAVAILABLE, "server_error"),  # Anthropic's "overloaded"
}

OAI_STATUS_KEY = "x-oai-status"
OAI_ERROR_KEY = "x-oai-error"
# The envelope travels as gRPC trailing metadata, which peers cap (Envoy: 60 KiB of headers):
# a message or param echoing a huge input is cut.
MAX_MESSAGE_BYTES = 1024
MAX_PARAM_BYTES = 256


def clip(text: str, limit: int) -> str:
    """`text` cut to `limit` UTF-8 bytes, ending in '...' when cut."""
    raw = text.encode()
    if len(raw) <= limit:
        return text
    return raw[: limit - 3].decode("utf-8", "ignore") + "..."


class ApiError(Exception):
    """An error the client should see, with its HTTP status and OpenAI error fields."""

    def __init__(
        self,
        status: int,
        message: str,
        code: str | None = None,
        param: str | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        message = clip(message, MAX_MESSAGE_BYTES)
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.param = None if param is None else clip(param, MAX_PARAM_BYTES)
        self.extra = extra or {}

    @property
    def grpc_code(self) -> grpc.StatusCode:
        return _BY_STATUS.get(self.status, _BY_STATUS[500])[0]

    @property
    def error_type(self) -> str:
        return _BY_STATUS.get(self.status, _BY_STATUS[500])[1]

    def body(self) -> dict[str, Any]:
        error = {"message": self.message, "type": self.error_type, "param": self.param, "code": self.code}
        error.update(self.extra)
        return {"error": error}

    def trailing_metadata(self) -> tuple[tuple[str, str], ...]:
        # Metadata values must be ASCII: the stdlib encoder escapes everything else as \uXXXX.
        body = json.dumps(self.body(), ensure_ascii=True, separators=(",", ":"))
        return ((OAI_STATUS_KEY, str(self.status)), (OAI_ERROR_KEY, body))


def invalid(
    message: str, code: str | None = "invalid_request", param: str | None = None, **extra: Any
) -> ApiError:
    return ApiError(400, message, code, param, extra or None)


def not_found(kind: str, ident: str, param: str | None = None) -> ApiError:
    return ApiError(404, f"No {kind} found with id '{ident}'.", "not_found", param)


def conflict(message: str, code: str = "conflict") -> ApiError:
    return ApiError(409, message, code)


def unauthenticated(message: str = "Incorrect or missing API key.") -> ApiError:
    return ApiError(401, message, "invalid_api_key")
