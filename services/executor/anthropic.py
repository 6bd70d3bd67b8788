"""The adapter for providers of kind `anthropic` (Anthropic's Messages API).

- OpenAI chat completion items are translated to a Messages request and the answer back to
  a `chat.completion` (errors to OpenAI's envelope), by `services.common.translate`
  (`chat_to_anthropic`, `responses`, `errors`): one batch file runs on any provider, and
  fallbacks may cross providers. What cannot be expressed is `UnsupportedRequest` naming the
  parameter (the item fails with a 400, or runs on the next fallback).
- Message Batch items (`MESSAGES_ENDPOINT`) are Messages requests already: they go as they are
  (only `model` becomes the provider's name of it), and the answer is kept as Anthropic wrote it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

import orjson

from batchgate.services.common.api_shapes import CHAT_ENDPOINT, MESSAGES_ENDPOINT
from batchgate.services.common.catalogue import ProviderConfig
from batchgate.services.common.translate.chat_to_anthropic import to_anthropic_request
from batchgate.services.common.translate.errors import to_openai_error
from batchgate.services.common.translate.responses import to_chat_completion
from batchgate.services.common.translate.shared import JsonObject, Untranslatable
from batchgate.services.executor.upstream import (
    UnsupportedRequest,
    UpstreamAnswer,
    UpstreamRequest,
    parse_answer,
)


class AnthropicMessages:
    """A provider of kind `anthropic`: `POST {base_url}/messages` with `x-api-key`."""

    def __init__(self, provider: ProviderConfig) -> None:
        self.provider = provider
        self._url = provider.base_url.rstrip("/") + "/messages"
        self._headers = {"content-type": "application/json", "anthropic-version": provider.anthropic_version}

    def _params(self, endpoint: str, body: bytes, upstream_model: str) -> JsonObject:
        payload = orjson.loads(body)
        if endpoint == MESSAGES_ENDPOINT:
            return {**payload, "model": upstream_model}
        if endpoint != CHAT_ENDPOINT:
            raise UnsupportedRequest(f"Anthropic models do not serve {endpoint}.", "url")
        try:
            return to_anthropic_request(
                payload, model=upstream_model, default_max_tokens=self.provider.default_max_tokens
            )
        except Untranslatable as exc:
            raise UnsupportedRequest(exc.message, exc.param) from None

    def build(self, endpoint: str, body: bytes, upstream_model: str, requested_model: str) -> UpstreamRequest:
        params = self._params(endpoint, body, upstream_model)
        return UpstreamRequest(url=self._url, headers=self._headers, content=orjson.dumps(params))

    def auth(self, api_key: str) -> dict[str, str]:
        return {"x-api-key": api_key} if api_key else {}

    def request_id(self, headers: Mapping[str, str]) -> str | None:
        return headers.get("request-id") or headers.get("x-request-id")

    def answer(self, endpoint: str, status_code: int, raw: bytes, request_id: str) -> UpstreamAnswer:
        answer = parse_answer(raw, status_code)
        if endpoint == MESSAGES_ENDPOINT:
            return UpstreamAnswer(answer.status_code, answer.body, answer.parsed, request_id)
        if 200 <= answer.status_code < 300:
            translated = to_chat_completion(answer.parsed, created=int(time.time()))
        else:
            translated = to_openai_error(answer.status_code, answer.parsed)
        return UpstreamAnswer(answer.status_code, orjson.dumps(translated), translated, request_id)
