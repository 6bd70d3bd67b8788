"""Upstream adapters: how one item becomes an HTTP request to a provider, and how the answer
comes back in OpenAI's shape.

`OpenAICompatible` passes requests through (OpenAI, vLLM, Ollama, llama.cpp all speak the same
API); only the model name is rewritten when the provider calls it differently.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from services.common.config import ProviderConfig


@dataclass(frozen=True)
class UpstreamRequest:
    url: str
    headers: dict[str, str]
    content: bytes


@dataclass(frozen=True)
class UpstreamAnswer:
    """An HTTP answer turned into OpenAI's shape: `body` is compact JSON."""

    status_code: int
    body: bytes
    parsed: Any
    request_id: str


def error_body(message: str, error_type: str = "upstream_error", code: str | None = None) -> bytes:
    return orjson.dumps({"error": {"message": message, "type": error_type, "param": None, "code": code}})


def _parse(raw: bytes, status_code: int) -> tuple[bytes, Any]:
    """Compact JSON bytes and the parsed value; a non-JSON body becomes an OpenAI error body."""
    try:
        parsed = orjson.loads(raw)
    except orjson.JSONDecodeError:
        text = raw[:1000].decode("utf-8", "replace")
        body = error_body(f"Upstream answered HTTP {status_code} with a non-JSON body: {text}")
        return body, orjson.loads(body)
    if 200 <= status_code < 300 and not isinstance(parsed, dict):
        body = error_body("Upstream answered with JSON that is not an object.")
        return body, orjson.loads(body)
    compact = raw if b"\n" not in raw and b"\r" not in raw else orjson.dumps(parsed)
    return compact, parsed


class OpenAICompatible:
    """Any server implementing OpenAI's HTTP API."""

    def __init__(self, provider: ProviderConfig) -> None:
        self.provider = provider
        self._base = provider.base_url.rstrip("/")

    def build(
        self, endpoint: str, body: bytes, upstream_model: str, requested_model: str, api_key: str
    ) -> UpstreamRequest:
        path = endpoint.removeprefix("/v1")
        if upstream_model != requested_model:
            payload = orjson.loads(body)
            payload["model"] = upstream_model
            body = orjson.dumps(payload)
        headers = {"content-type": "application/json"}
        if api_key:
            headers["authorization"] = f"Bearer {api_key}"
        return UpstreamRequest(url=self._base + path, headers=headers, content=body)

    def answer(self, endpoint: str, status_code: int, raw: bytes, request_id: str) -> UpstreamAnswer:
        body, parsed = _parse(raw, status_code)
        return UpstreamAnswer(status_code=status_code, body=body, parsed=parsed, request_id=request_id)
