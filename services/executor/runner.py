"""Running one leased item: route to a provider, call it, retry, fall back, time out.

Transient failures (429, 408/409, 5xx, timeouts, connection errors) are retried with
exponential backoff and jitter, honouring `Retry-After`; once a model's attempts are spent the
item moves to the model's fallbacks in order. Other 4xx answers are final. The outcome says
which model answered and how many upstream calls it took.
"""

from __future__ import annotations

import asyncio
import email.utils
import itertools
import logging
import random
import time
import uuid
from dataclasses import dataclass

import httpx
from httpx_aiohttp import AiohttpTransport

from batchgate.internal.v1 import recorder_pb2, scheduler_pb2
from services.common.config import ModelConfig, ProviderConfig, RetryPolicy, Settings
from services.executor.upstream import OpenAICompatible, UpstreamAnswer
from services.executor.usage import usage_of

log = logging.getLogger(__name__)

RETRYABLE_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504, 529})


@dataclass(frozen=True)
class TransportFailure:
    """No HTTP answer: the time limit passed or the connection failed."""

    code: str
    message: str


@dataclass
class _Provider:
    config: ProviderConfig
    adapter: OpenAICompatible
    client: httpx.AsyncClient
    slots: asyncio.Semaphore
    keys: itertools.cycle[str]
    timeout_s: float


def retry_after_s(headers: httpx.Headers) -> float | None:
    """Seconds from `retry-after-ms` or `retry-after` (seconds or an HTTP date)."""
    if (ms := headers.get("retry-after-ms")) is not None:
        try:
            return max(float(ms) / 1000, 0.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value) if value else None
        return max(parsed.timestamp() - time.time(), 0.0) if parsed else None


def backoff_s(policy: RetryPolicy, retry: int, retry_after: float | None) -> float:
    """Wait before retry number `retry` (0-based): exponential with jitter, or the server's ask."""
    if retry_after is not None:
        return retry_after
    delay = min(policy.initial_interval_s * policy.backoff_coefficient**retry, policy.max_interval_s)
    return delay * (0.5 + random.random() / 2)


class ItemRunner:
    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._providers: dict[str, _Provider] = {}
        for config in settings.providers:
            transport = AiohttpTransport(
                limits=httpx.Limits(max_connections=config.max_concurrency, keepalive_expiry=30.0)
            )
            self._providers[config.name] = _Provider(
                config=config,
                adapter=OpenAICompatible(config),
                client=httpx.AsyncClient(transport=transport, timeout=None),
                slots=asyncio.Semaphore(config.max_concurrency),
                keys=itertools.cycle(config.api_keys or ("",)),
                timeout_s=config.timeout_s or settings.request_timeout_s,
            )

    async def close(self) -> None:
        for provider in self._providers.values():
            await provider.client.aclose()

    def _chain(self, model: str) -> list[ModelConfig]:
        first = self._settings.model(model)
        if first is None:
            return []
        chain = [first]
        for name in first.fallbacks:
            fallback = self._settings.model(name)
            if fallback is not None and fallback not in chain:
                chain.append(fallback)
        return chain

    async def run(self, item: scheduler_pb2.LeasedItem) -> recorder_pb2.Outcome:
        chain = self._chain(item.model)
        if not chain:
            return self._failure(
                item,
                TransportFailure("model_not_found", f"The model {item.model!r} is not configured."),
                "",
                "",
                0,
            )
        policy = self._settings.retry
        calls = 0
        last: UpstreamAnswer | TransportFailure | None = None
        for model in chain:
            provider = self._providers[model.provider]
            for retry in range(policy.max_attempts):
                result, retry_after, latency_ms = await self._call(provider, model, item)
                calls += 1
                if isinstance(result, UpstreamAnswer) and 200 <= result.status_code < 300:
                    return self._success(item, result, model.name, provider.config.name, calls, latency_ms)
                last = result
                if isinstance(result, UpstreamAnswer) and result.status_code not in RETRYABLE_STATUS:
                    return self._failure(item, result, model.name, provider.config.name, calls)
                if retry + 1 < policy.max_attempts:
                    await asyncio.sleep(min(backoff_s(policy, retry, retry_after), provider.timeout_s))
        assert last is not None
        return self._failure(
            item, last, chain[-1].name, self._providers[chain[-1].provider].config.name, calls
        )

    async def _call(
        self,
        provider: _Provider,
        model: ModelConfig,
        item: scheduler_pb2.LeasedItem,
    ) -> tuple[UpstreamAnswer | TransportFailure, float | None, int]:
        request = provider.adapter.build(
            item.endpoint, item.body, model.upstream_model or model.name, item.model, next(provider.keys)
        )
        async with provider.slots:
            started = time.monotonic()
            try:
                async with asyncio.timeout(provider.timeout_s):
                    response = await provider.client.post(
                        request.url, content=request.content, headers=request.headers
                    )
                    raw = await response.aread()
            except TimeoutError:
                return (
                    TransportFailure(
                        "request_timeout", f"The upstream did not answer within {provider.timeout_s:g} s."
                    ),
                    None,
                    int((time.monotonic() - started) * 1000),
                )
            except httpx.HTTPError as exc:
                return (
                    TransportFailure("connection_error", f"Could not reach the upstream: {exc!r}"[:500]),
                    None,
                    int((time.monotonic() - started) * 1000),
                )
            latency_ms = int((time.monotonic() - started) * 1000)
        request_id = response.headers.get("x-request-id") or f"req_{uuid.uuid4().hex}"
        answer = provider.adapter.answer(item.endpoint, response.status_code, raw, request_id)
        return answer, retry_after_s(response.headers), latency_ms

    def _success(
        self,
        item: scheduler_pb2.LeasedItem,
        answer: UpstreamAnswer,
        model: str,
        provider: str,
        calls: int,
        latency_ms: int,
    ) -> recorder_pb2.Outcome:
        return recorder_pb2.Outcome(
            ref=item.ref,
            state=recorder_pb2.OUTCOME_STATE_SUCCEEDED,
            status_code=answer.status_code,
            response_body=answer.body,
            request_id=answer.request_id,
            model=model,
            provider=provider,
            usage=usage_of(answer.parsed),
            attempts=calls,
            latency_ms=latency_ms,
        )

    def _failure(
        self,
        item: scheduler_pb2.LeasedItem,
        result: UpstreamAnswer | TransportFailure,
        model: str,
        provider: str,
        calls: int,
    ) -> recorder_pb2.Outcome:
        outcome = recorder_pb2.Outcome(
            ref=item.ref,
            state=recorder_pb2.OUTCOME_STATE_FAILED,
            model=model,
            provider=provider,
            attempts=calls,
        )
        if isinstance(result, UpstreamAnswer):
            outcome.status_code = result.status_code
            outcome.response_body = result.body
            outcome.request_id = result.request_id
        else:
            outcome.error_code = result.code
            outcome.error_message = result.message
        return outcome
