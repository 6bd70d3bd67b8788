"""Upstream adapters: how one item becomes an HTTP request to a provider, and how the answer
comes back in OpenAI's shape.

`OpenAICompatible` passes requests through (OpenAI, vLLM, Ollama, llama.cpp all speak the same
API); only the model name is rewritten when the provider calls it differently. Message Batch
items (Anthropic-shaped, `MESSAGES_ENDPOINT`) are translated to a chat completion request
(`translate.anthropic_to_chat`, checked at create to translate) and a successful answer back
to an Anthropic Message (`translate.responses`); error answers are kept as the upstream wrote
them, and the results stream types them in Anthropic's envelope. The Anthropic adapter
(`batchgate.services.executor.anthropic`) translates chat completions both ways. An adapter that
cannot express a request raises `UnsupportedRequest`: the item fails at once with a 400 in
OpenAI's error shape, as the provider itself would have answered.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from batchgate.services.common.api_shapes import MESSAGES_ENDPOINT, chat_target
from batchgate.services.common.catalogue import ProviderConfig
from batchgate.services.common.errors import ApiError
from batchgate.services.common.translate.anthropic_to_chat import ChatTarget, to_chat_request
from batchgate.services.common.translate.errors import to_anthropic_error
from batchgate.services.common.translate.responses import to_anthropic_message
from batchgate.services.common.translate.shared import Untranslatable

CHAT_PATH = "/chat/completions"
BAD_GATEWAY = 502


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


def _new_request_id_prefix() -> None:
    """A process's own random half of the ids it makes (a forked child draws its own)."""
    global _request_id_prefix
    _request_id_prefix = f"req_{os.urandom(8).hex()}"


_request_id_prefix = ""
_new_request_id_prefix()
os.register_at_fork(after_in_child=_new_request_id_prefix)
_request_numbers = itertools.count()


def fallback_request_id() -> str:
    """An id for an answer whose upstream gave none (Ollama, most vLLM setups): 32 hex digits
    as OpenAI's, random per process and then counted. A `uuid4` per answer cost 3.1 µs (a
    `getrandom` call and a `UUID`), this 0.2."""
    return f"{_request_id_prefix}{next(_request_numbers):016x}"


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
        self.chat_target = chat_target(provider)
        """What the server takes beyond OpenAI's parameters, for translated Message Batch items."""

    def build(self, endpoint: str, body: bytes, upstream_model: str, requested_model: str) -> UpstreamRequest:
        if endpoint == MESSAGES_ENDPOINT:
            return UpstreamRequest(
                url=self._base + CHAT_PATH,
                headers={"content-type": "application/json"},
                content=_chat_request(body, upstream_model, self.chat_target),
            )
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
        answer = UpstreamAnswer(answer.status_code, answer.body, answer.parsed, request_id)
        return _message_answer(answer) if endpoint == MESSAGES_ENDPOINT else answer


def _chat_request(body: bytes, upstream_model: str, target: ChatTarget) -> bytes:
    """The chat completion request for a Message Batch item's params."""
    try:
        return orjson.dumps(to_chat_request(orjson.loads(body), model=upstream_model, target=target))
    except Untranslatable as exc:
        raise UnsupportedRequest(exc.message, exc.param) from None


def _message_answer(answer: UpstreamAnswer) -> UpstreamAnswer:
    """A successful chat.completion as an Anthropic Message; other answers as they are. A
    success the Message shape cannot hold counts as a bad gateway answer (retried)."""
    if not 200 <= answer.status_code < 300:
        return answer
    try:
        message = to_anthropic_message(answer.parsed)
    except Untranslatable as exc:
        why = {"error": {"message": f"The upstream's answer cannot be translated: {exc.message}"}}
        error = to_anthropic_error(BAD_GATEWAY, why)
        return UpstreamAnswer(BAD_GATEWAY, orjson.dumps(error), error, answer.request_id)
    return UpstreamAnswer(answer.status_code, orjson.dumps(message), message, answer.request_id)
