"""Upstream adapters: how one item becomes an HTTP request to a provider, and how the answer
comes back in OpenAI's shape.

`OpenAICompatible` passes requests through (OpenAI, vLLM, Ollama, llama.cpp all speak the same
API); only the model name is rewritten when the provider calls it differently. The Anthropic
adapter (`batchgate.services.executor.anthropic`) translates chat completions both ways. An adapter that
cannot express a request raises `UnsupportedRequest`: the item fails at once with a 400 in
OpenAI's error shape, as the provider itself would have answered.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from batchgate.services.common.catalogue import ProviderConfig
from batchgate.services.common.errors import ApiError


@dataclass(frozen=True)
class UpstreamRequest:
    url: str
    headers: dict[str, str]
    """Without the API key: `Adapter.auth` adds it per call (keys rotate between calls)."""
    content: bytes


@dataclass(frozen=True)
class UpstreamAnswer:
    """An HTTP answer turned into OpenAI's shape: `body` is compact JSON."""

    status_code: int
    body: bytes
    parsed: Any
    request_id: str


class UnsupportedRequest(Exception):
    """The request uses something this provider cannot do; `param` names it."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param


class Adapter(Protocol):
    provider: ProviderConfig

    def build(self, endpoint: str, body: bytes, upstream_model: str, requested_model: str) -> UpstreamRequest:
        """The HTTP request for one item (raises `UnsupportedRequest`)."""
        ...

    def auth(self, api_key: str) -> dict[str, str]:
        """The headers that carry `api_key`."""
        ...

    def request_id(self, headers: Mapping[str, str]) -> str | None:
        """The provider's id of this request, from its answer's headers."""
        ...

    def answer(self, endpoint: str, status_code: int, raw: bytes, request_id: str) -> UpstreamAnswer:
        """The answer in OpenAI's shape (success body or `{"error": {…}}`)."""
        ...


def error_body(
    status: int, message: str, code: str | None = "upstream_error", param: str | None = None
) -> bytes:
    """OpenAI's error envelope, with the `type` batchgate uses for `status`."""
    return orjson.dumps(ApiError(status, message, code, param).body())


def unsupported_answer(exc: UnsupportedRequest, request_id: str) -> UpstreamAnswer:
    body = error_body(400, exc.message, "unsupported_parameter", exc.param)
    return UpstreamAnswer(status_code=400, body=body, parsed=orjson.loads(body), request_id=request_id)


def parse_answer(raw: bytes, status_code: int) -> UpstreamAnswer:
    """The answer as compact JSON; a body that is not JSON (or a 2xx that is not a JSON object)
    becomes an OpenAI error body, and such a 2xx counts as 502 (bad gateway, retried)."""
    try:
        parsed = orjson.loads(raw)
        readable = isinstance(parsed, dict) or status_code >= 300
    except orjson.JSONDecodeError:
        readable = False
    if not readable:
        status = status_code if status_code >= 300 else 502
        text = raw[:1000].decode("utf-8", "replace")
        body = error_body(status, f"Upstream answered HTTP {status_code} with an unreadable body: {text}")
        return UpstreamAnswer(status, body, orjson.loads(body), "")
    compact = raw if b"\n" not in raw and b"\r" not in raw else orjson.dumps(parsed)
    return UpstreamAnswer(status_code, compact, parsed, "")


class OpenAICompatible:
    """Any server implementing OpenAI's HTTP API."""

    def __init__(self, provider: ProviderConfig) -> None:
        self.provider = provider
        self._base = provider.base_url.rstrip("/")

    def build(self, endpoint: str, body: bytes, upstream_model: str, requested_model: str) -> UpstreamRequest:
        if upstream_model != requested_model:
            payload = orjson.loads(body)
            payload["model"] = upstream_model
            body = orjson.dumps(payload)
        return UpstreamRequest(
            url=self._base + endpoint.removeprefix("/v1"),
            headers={"content-type": "application/json"},
            content=body,
        )

    def auth(self, api_key: str) -> dict[str, str]:
        return {"authorization": f"Bearer {api_key}"} if api_key else {}

    def request_id(self, headers: Mapping[str, str]) -> str | None:
        return headers.get("x-request-id")

    def answer(self, endpoint: str, status_code: int, raw: bytes, request_id: str) -> UpstreamAnswer:
        answer = parse_answer(raw, status_code)
        return UpstreamAnswer(answer.status_code, answer.body, answer.parsed, request_id)
