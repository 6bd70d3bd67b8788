"""Running one leased item: route to a provider, call it, retry, fall back, time out.

Transient failures (429, 408/409, 5xx, timeouts, connection errors) are retried with
exponential backoff and jitter, honouring `Retry-After`; once a model's attempts are spent the
item moves to the model's fallbacks in order. Other 4xx answers are final. A model whose
provider cannot express the request (see `UnsupportedRequest`) is skipped for the next one.
The outcome says which model answered and how many upstream calls it took.

Each call first takes a slot of the provider's adaptive concurrency limit, then a key from its
pool (round-robin, skipping keys that rest after a 429 or are out of budget), and runs under
the provider's time limit. A 429 rests the key for its `Retry-After` (or the provider's
cool-down) and counts towards lowering the concurrency; with one key that is exactly honouring
`Retry-After`, with several the retry moves on to a key that is not resting. Any other
`Retry-After` (503, …) is the item's own wait before its retry.

HTTP goes through one aiohttp session per provider (a keep-alive pool sized to its
concurrency): aiohttp stays fast with hundreds of requests in flight, where httpx's own pool
and its aiohttp transport cost 2–3× more per request (`reference/http-client.md`).
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import random
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

import aiohttp
import orjson
from opentelemetry import trace

from batchgate.internal.v1 import recorder_pb2, scheduler_pb2
from services.common import telemetry
from services.common.config import ModelConfig, ProviderConfig, RetryPolicy, Settings
from services.executor import spans
from services.executor.anthropic import AnthropicMessages
from services.executor.limits import AdaptiveConcurrency, KeyPool
from services.executor.metrics import ExecutorMetrics
from services.executor.upstream import (
    Adapter,
    OpenAICompatible,
    UnsupportedRequest,
    UpstreamAnswer,
    UpstreamRequest,
    unsupported_answer,
)
from services.executor.usage import estimate_tokens, usage_of

log = logging.getLogger(__name__)

RETRYABLE_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
KEEPALIVE_S = 30.0


@dataclass(frozen=True)
class TransportFailure:
    """No HTTP answer: the time limit passed or the connection failed."""

    code: str
    message: str


Result = UpstreamAnswer | TransportFailure


@dataclass
class _Provider:
    config: ProviderConfig
    adapter: Adapter
    concurrency: AdaptiveConcurrency
    keys: KeyPool
    timeout_s: float
    session: aiohttp.ClientSession | None = field(default=None)

    def http(self) -> aiohttp.ClientSession:
        """The provider's session, made on first use (it needs the running event loop)."""
        if self.session is None:
            connector = aiohttp.TCPConnector(
                limit=self.config.max_concurrency, keepalive_timeout=KEEPALIVE_S, ttl_dns_cache=300
            )
            self.session = aiohttp.ClientSession(
                connector=connector, timeout=aiohttp.ClientTimeout(total=None), auto_decompress=True
            )
        return self.session


@dataclass(frozen=True)
class _Call:
    """One upstream call of an item: where it goes and what it sends."""

    provider: _Provider
    model: ModelConfig
    request: UpstreamRequest
    item: scheduler_pb2.LeasedItem
    estimate: int
    """Tokens it may use, for the key's tokens/min budget (0: no budget)."""


def retry_after_s(headers: Mapping[str, str]) -> float | None:
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


def _adapter(config: ProviderConfig) -> Adapter:
    return AnthropicMessages(config) if config.kind == "anthropic" else OpenAICompatible(config)


def _new_request_id() -> str:
    return f"req_{uuid.uuid4().hex}"


class ItemRunner:
    def __init__(self, settings: Settings, metrics: ExecutorMetrics | None = None) -> None:
        self._settings = settings
        self._metrics = metrics or ExecutorMetrics()
        self._providers: dict[str, _Provider] = {}
        share = max(settings.executors, 1)  # budgets are per deployment; this executor's part
        for config in settings.providers:
            self._providers[config.name] = _Provider(
                config=config,
                adapter=_adapter(config),
                concurrency=AdaptiveConcurrency(
                    config.max_concurrency, config.min_concurrency, config.adaptive_concurrency
                ),
                keys=KeyPool.build(
                    config.api_keys, config.requests_per_minute / share, config.tokens_per_minute / share
                ),
                timeout_s=config.timeout_s or settings.request_timeout_s,
            )
        self._chains: dict[str, list[ModelConfig]] = {}

    async def close(self) -> None:
        for provider in self._providers.values():
            if provider.session is not None:
                await provider.session.close()

    def _chain(self, model: str) -> list[ModelConfig]:
        """The model and its fallbacks, in order (memoized: looked up for every item)."""
        chain = self._chains.get(model)
        if chain is None:
            first = self._settings.model(model)
            chain = [] if first is None else [first]
            for name in first.fallbacks if first else ():
                fallback = self._settings.model(name)
                if fallback is not None and fallback not in chain:
                    chain.append(fallback)
            self._chains[model] = chain
        return chain

    def _estimate(self, item: scheduler_pb2.LeasedItem, chain: list[ModelConfig]) -> int:
        """The item's token estimate, when a provider on its chain has a token budget."""
        if all(self._providers[m.provider].config.tokens_per_minute <= 0 for m in chain):
            return 0
        try:
            return estimate_tokens(orjson.loads(item.body))
        except orjson.JSONDecodeError:
            return 0

    async def run(self, item: scheduler_pb2.LeasedItem) -> recorder_pb2.Outcome:
        """Run the item; a traced item's run is a span in its trace, and the outcome carries
        that span's traceparent (results records under it)."""
        if not telemetry.traced("executor", item.traceparent):
            return _logged(item, await self._run(item, None))
        with telemetry.child_span(
            "executor", "batchgate.item.run", item.traceparent, spans.run_attributes(item)
        ) as span:
            assert span is not None
            outcome = await self._run(item, span)
            spans.end_run(span, outcome)
            outcome.traceparent = telemetry.traceparent_of(span)
            return _logged(item, outcome)

    async def _run(self, item: scheduler_pb2.LeasedItem, span: trace.Span | None) -> recorder_pb2.Outcome:
        chain = self._chain(item.model)
        if not chain:
            failure = TransportFailure("model_not_found", f"The model {item.model!r} is not configured.")
            return _failure(item, failure, "", "", 0)
        policy = self._settings.retry
        estimate = self._estimate(item, chain)
        calls = 0
        last: tuple[Result, ModelConfig] | None = None
        for model in chain:
            provider = self._providers[model.provider]
            try:
                request = provider.adapter.build(
                    item.endpoint, item.body, model.upstream_model or model.name, item.model
                )
            except UnsupportedRequest as exc:
                if last is None:  # an upstream's own answer says more than "cannot express it"
                    last = unsupported_answer(exc, _new_request_id()), model
                continue
            call = _Call(provider, model, request, item, estimate)
            for retry in range(policy.max_attempts):
                calls += 1
                if span is None:
                    result, retry_after, latency_ms = await self._call(call)
                else:
                    result, retry_after, latency_ms = await self._traced_call(call, retry, calls)
                if isinstance(result, UpstreamAnswer) and 200 <= result.status_code < 300:
                    outcome = _success(item, result, model.name, provider.config.name, calls, latency_ms)
                    self._metrics.tokens(model.name, provider.config.name, outcome.usage)
                    return outcome
                last = result, model
                if isinstance(result, UpstreamAnswer) and result.status_code not in RETRYABLE_STATUS:
                    return _failure(item, result, model.name, provider.config.name, calls)
                if retry + 1 < policy.max_attempts:
                    reason = result.code if isinstance(result, TransportFailure) else str(result.status_code)
                    self._metrics.retry(model.name, provider.config.name, reason)
                    own_wait = None if _status(result) == 429 else retry_after  # 429: the key rests
                    await asyncio.sleep(min(backoff_s(policy, retry, own_wait), provider.timeout_s))
        assert last is not None
        result, model = last
        return _failure(item, result, model.name, model.provider, calls)

    async def _traced_call(self, call: _Call, retry: int, number: int) -> tuple[Result, float | None, int]:
        """`_call` as an attempt span of the item's trace."""
        record_content = self._settings.trace_record_content
        with spans.attempt(
            call.item, call.model, call.provider.config, call.request, retry, number, record_content
        ) as span:
            result, retry_after, latency_ms = await self._call(call, traced=True)
            if isinstance(result, UpstreamAnswer):
                spans.end_attempt(span, result, None, record_content)
            else:
                spans.end_attempt(span, None, result.code, record_content)
            return result, retry_after, latency_ms

    async def _call(self, call: _Call, traced: bool = False) -> tuple[Result, float | None, int]:
        """One upstream call: (what came back, its Retry-After, latency in ms)."""
        provider, request = call.provider, call.request
        await provider.concurrency.acquire()
        rate_limited = False
        try:
            key = await provider.keys.take(call.estimate)
            headers = {**request.headers, **provider.adapter.auth(key.secret)}
            started = time.monotonic()
            if traced:
                with spans.http_call(request.url, headers, len(request.content)) as http_span:
                    answered = await self._post(provider, request, headers)
                    spans.end_http(
                        http_span,
                        answered[0] if isinstance(answered, tuple) else 0,
                        answered[1] if isinstance(answered, tuple) else None,
                        answered.code if isinstance(answered, TransportFailure) else None,
                    )
            else:
                answered = await self._post(provider, request, headers)
            latency_ms = _ms_since(started)
            if isinstance(answered, TransportFailure):
                self._observe(call, time.monotonic() - started, 0, answered.code)
                return answered, None, latency_ms
            status, response_headers, raw = answered
            self._observe(call, time.monotonic() - started, status, None)
            request_id = provider.adapter.request_id(response_headers) or _new_request_id()
            answer = provider.adapter.answer(call.item.endpoint, status, raw, request_id)
            retry_after = retry_after_s(response_headers)
            if status == 429:
                rate_limited = True
                rest = retry_after if retry_after is not None else provider.config.rate_limit_cooldown_s
                provider.keys.cool_down(key, rest)
            elif call.estimate and 200 <= answer.status_code < 300:
                usage = usage_of(answer.parsed)
                key.correct(call.estimate, usage.prompt_tokens + usage.completion_tokens)
            return answer, retry_after, latency_ms
        finally:
            provider.concurrency.release(rate_limited)

    async def _post(
        self, provider: _Provider, request: UpstreamRequest, headers: dict[str, str]
    ) -> tuple[int, Mapping[str, str], bytes] | TransportFailure:
        """The HTTP exchange under the provider's time limit: (status, headers, body)."""
        try:
            async with (
                asyncio.timeout(provider.timeout_s),
                provider.http().post(request.url, data=request.content, headers=headers) as response,
            ):
                return response.status, response.headers, await response.read()
        except TimeoutError:
            return TransportFailure(
                "request_timeout", f"The upstream did not answer within {provider.timeout_s:g} s."
            )
        except aiohttp.ClientError as exc:
            return TransportFailure("connection_error", f"Could not reach the upstream: {exc!r}"[:500])

    def _observe(self, call: _Call, seconds: float, status: int, failure: str | None) -> None:
        self._metrics.call(
            telemetry.gen_ai_operation(call.item.endpoint),
            call.model.name,
            call.provider.config.name,
            spans.provider_name(call.provider.config),
            seconds,
            status,
            failure or (str(status) if status >= 400 else None),
        )


def _logged(item: scheduler_pb2.LeasedItem, outcome: recorder_pb2.Outcome) -> recorder_pb2.Outcome:
    """A failed item is logged (inside its run span when traced, so the line leads to the trace)."""
    if outcome.state != recorder_pb2.OUTCOME_STATE_SUCCEEDED:
        log.info(
            "%s/%d failed: %s after %d upstream call(s)",
            item.ref.batch_id,
            item.ref.index,
            outcome.error_code or f"HTTP {outcome.status_code}",
            outcome.attempts,
            extra={"batch_id": item.ref.batch_id, "item_index": item.ref.index, "custom_id": item.custom_id},
        )
    return outcome


def _status(result: Result) -> int:
    return result.status_code if isinstance(result, UpstreamAnswer) else 0


def _ms_since(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


def _success(
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
    item: scheduler_pb2.LeasedItem, result: Result, model: str, provider: str, calls: int
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
