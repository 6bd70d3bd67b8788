"""Running one leased item: route to a provider, call it, retry, fall back, time out.

Transient failures (429, 408/409, 5xx, timeouts, connection errors) are retried with
exponential backoff and jitter, honouring `Retry-After`; once a model's attempts are spent the
item moves to the model's fallbacks in order. Other 4xx answers are final. A model whose
provider cannot express the request (see `UnsupportedRequest`) is skipped for the next one.
The outcome says which model answered and how many upstream calls it took.

Each call waits in the executor's `Dispatcher` for a slot of the executor and of its provider
and for a usable key, in priority order, and runs under the provider's time limit. A 429 is
the item's own backoff (its `Retry-After`, else the retry policy's) and tells the provider's
adaptive limit where the provider's capacity ends; only an answer saying the key's window is
spent (`x-ratelimit-remaining-*: 0`) rests the whole key, until the window resets.

The executor steers a running item through its `Control`: once the item's batch stops (cancel,
expiry) it makes no further call; if it made none yet it raises `NotStarted` (hand it back),
otherwise it ends with its last answer. The check runs right before each HTTP call starts.

HTTP goes through one aiohttp session per provider (a keep-alive pool sized to its
concurrency): aiohttp stays fast with hundreds of requests in flight, where httpx's own pool
and its aiohttp transport cost 2–3× more per request (`reference/http-client.md`).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import random
import time
from dataclasses import dataclass, field

import aiohttp
import orjson
from opentelemetry import trace

from batchgate.internal.v1 import recorder_pb2, scheduler_pb2
from batchgate.services.common import telemetry
from batchgate.services.common.catalogue import ModelConfig, ProviderConfig, RetryPolicy
from batchgate.services.common.config import Settings
from batchgate.services.common.message_budget import max_body_bytes
from batchgate.services.common.token_usage import usage_of
from batchgate.services.common.waits import sleep_unless
from batchgate.services.executor import exchange, outcomes, spans
from batchgate.services.executor.anthropic import AnthropicMessages
from batchgate.services.executor.limits import AdaptiveLimit, Dispatcher, Granter, KeyPool, Lane, Slot, rank
from batchgate.services.executor.metrics import ExecutorMetrics
from batchgate.services.executor.outcomes import Result, TransportFailure
from batchgate.services.executor.rate_signals import retry_after_s, spent_window_s
from batchgate.services.executor.tools.loop import ToolLoop
from batchgate.services.executor.upstream import (
    Adapter,
    OpenAICompatible,
    UnsupportedRequest,
    UpstreamAnswer,
    UpstreamRequest,
    fallback_request_id,
    unsupported_answer,
)
from batchgate.services.executor.usage import estimate_tokens
from batchgate.services.executor.workflows.loop import WorkflowLoop

log = logging.getLogger(__name__)

RETRYABLE_STATUS = frozenset({408, 409, 429})
"""Retried besides every 5xx (README: 529 and a proxy's 520 or 524 too; they were final)."""
KEEPALIVE_S = 30.0


class _Stopped(Exception):
    """The item's batch stopped: no further call."""


_orders = itertools.count()


@dataclass
class Control:
    """How the executor steers one running item."""

    order: int = field(default_factory=lambda: next(_orders))
    """Its place among items of its priority (the order they were leased in)."""
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when the item's batch starts no new call (cancel): the item ends before its next."""
    started: bool = False
    """Whether its first upstream call has been sent (until then it can be handed back)."""
    _waiting: asyncio.Future[Slot] | None = None

    def halt(self) -> None:
        """No further call: a wait for a retry or for a slot ends now."""
        self.stop.set()
        if self._waiting is not None and not self._waiting.done():
            self._waiting.cancel()

    def waiting_on(self, future: asyncio.Future[Slot]) -> None:
        self._waiting = future

    async def pause(self, seconds: float) -> None:
        """Wait before a retry, cut short by a stop."""
        await sleep_unless(self.stop, seconds)


@dataclass
class _Provider:
    config: ProviderConfig
    adapter: Adapter
    lane: Lane
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
    rank: tuple[int, int, int]
    control: Control


@dataclass(frozen=True)
class _Answered:
    """What one call came back with."""

    result: Result
    own_wait_s: float | None
    """The item's wait before retrying, when the answer asks for one (`Retry-After`)."""
    latency_ms: int


def backoff_s(policy: RetryPolicy, retry: int, retry_after: float | None) -> float:
    """Wait before retry number `retry` (0-based): exponential with jitter, or the server's ask."""
    if retry_after is not None:
        return retry_after
    delay = min(policy.initial_interval_s * policy.backoff_coefficient**retry, policy.max_interval_s)
    return delay * (0.5 + random.random() / 2)


def _adapter(config: ProviderConfig) -> Adapter:
    return AnthropicMessages(config) if config.kind == "anthropic" else OpenAICompatible(config)


class ItemRunner:
    def __init__(
        self,
        settings: Settings,
        metrics: ExecutorMetrics | None = None,
        dispatcher: Dispatcher | None = None,
        granter: Granter | None = None,
    ) -> None:
        """`granter` hands out the shared budgets of keys that have some (the scheduler's)."""
        self._settings = settings
        self._max_answer = max_body_bytes(settings)
        self._metrics = metrics or ExecutorMetrics()
        self.dispatcher = dispatcher or Dispatcher(settings.executor_concurrency)
        self._providers: dict[str, _Provider] = {}
        for config in settings.providers:
            limit = AdaptiveLimit(config.max_concurrency, config.min_concurrency, config.adaptive_concurrency)
            keys = KeyPool.build(
                config.name, config.api_keys, config.requests_per_minute, config.tokens_per_minute, granter
            )
            self._providers[config.name] = _Provider(
                config=config,
                adapter=_adapter(config),
                lane=self.dispatcher.lane(limit, keys),
                timeout_s=config.timeout_s or settings.request_timeout_s,
            )
        self._chains: dict[str, list[ModelConfig]] = {}
        self._tools = ToolLoop(settings)
        self._workflows = WorkflowLoop(settings, self._tools)

    @property
    def concurrency(self) -> int:
        """Calls this executor can have in flight at once: `executor_concurrency`, or its
        providers' `max_concurrency` together where that is lower."""
        ceiling = sum(provider.config.max_concurrency for provider in self._providers.values())
        return min(self._settings.executor_concurrency, ceiling or self._settings.executor_concurrency)

    async def close(self) -> None:
        for provider in self._providers.values():
            if provider.session is not None:
                await provider.session.close()
        await self._tools.close()
        await self._workflows.close()

    def _chain(self, item: scheduler_pb2.LeasedItem) -> list[ModelConfig]:
        """The item's model and its fallbacks, in order (memoized: looked up for every item);
        in a batch bounded by its key's policy, only the fallbacks that policy allowed (a
        project's `--allow-models` had not kept its records off a fallback it denied)."""
        chain = self._chains.get(item.model)
        if chain is None:
            first = self._settings.model(item.model)
            chain = [] if first is None else [first]
            for name in first.fallbacks if first else ():
                fallback = self._settings.model(name)
                if fallback is not None and fallback not in chain:
                    chain.append(fallback)
            self._chains[item.model] = chain
        if item.models_bounded and len(chain) > 1:
            return [chain[0], *(m for m in chain[1:] if m.name in item.allowed_models)]
        return chain

    def _estimate(self, item: scheduler_pb2.LeasedItem, chain: list[ModelConfig]) -> int:
        """The item's token estimate, when a provider on its chain has a token budget."""
        if all(self._providers[m.provider].config.tokens_per_minute <= 0 for m in chain):
            return 0
        try:
            return estimate_tokens(orjson.loads(item.body))
        except orjson.JSONDecodeError:
            return 0

    async def run(
        self, item: scheduler_pb2.LeasedItem, control: Control | None = None
    ) -> recorder_pb2.Outcome:
        """Run the item (raises `NotStarted` when its batch stopped before its first call); a
        traced item's run is a span in its trace, and the outcome carries that span's
        traceparent (results records under it). Items run (wait for slots) in priority order,
        then in their `Control.order`. A record with a tool_config runs its tool loop
        (`executor.tools`), a workflow record its workflow (`executor.workflows`), each model
        turn or request a `_run`."""
        control = control or Control()
        if not telemetry.traced("executor", item.traceparent):
            return outcomes.logged(item, await self._workflows.run(item, self._run, control, None))
        with telemetry.open_child_span(
            "executor", "batchgate.item.run", item.traceparent, spans.run_attributes(item)
        ) as span:
            assert span is not None
            outcome = await self._workflows.run(item, self._run, control, span)
            spans.end_run(span, outcome)
            outcome.traceparent = telemetry.traceparent_of(span)
            return outcomes.logged(item, outcome)

    async def _run(
        self, item: scheduler_pb2.LeasedItem, control: Control, span: trace.Span | None
    ) -> recorder_pb2.Outcome:
        """One turn of the item's run (its model chain); a traced one records its calls as it ends."""
        if span is None:
            return await self._chain_run(item, control, None)
        attempts: list[spans.Attempt] = []
        try:
            return await self._chain_run(item, control, attempts)
        finally:
            spans.record_attempts(span, attempts, self._settings.trace_record_content)

    async def _chain_run(
        self, item: scheduler_pb2.LeasedItem, control: Control, attempts: list[spans.Attempt] | None
    ) -> recorder_pb2.Outcome:
        chain = self._chain(item)
        if not chain:
            failure = TransportFailure("model_not_found", f"The model {item.model!r} is not configured.")
            return outcomes.failure(item, failure, "", "", 0)
        policy = self._settings.retry
        estimate = self._estimate(item, chain)
        item_rank = rank(item.priority_tier, item.priority, control.order)
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
                    last = unsupported_answer(exc, fallback_request_id()), model
                continue
            call = _Call(provider, model, request, item, estimate, item_rank, control)
            for retry in range(policy.max_attempts):
                try:
                    if attempts is None:
                        answered = await self._call(call)
                    else:
                        answered = await self._traced_call(call, retry, calls + 1, attempts)
                except _Stopped:
                    return outcomes.stopped(item, last, calls)
                calls += 1
                result = answered.result
                if isinstance(result, UpstreamAnswer) and 200 <= result.status_code < 300:
                    outcome = outcomes.success(
                        item, result, model.name, provider.config.name, calls, answered.latency_ms
                    )
                    self._metrics.tokens(model.name, provider.config.name, outcome.usage)
                    return outcome
                last = result, model
                if (
                    result.status_code not in RETRYABLE_STATUS and not 500 <= result.status_code <= 599
                    if isinstance(result, UpstreamAnswer)
                    else not result.retryable
                ):
                    return outcomes.failure(item, result, model.name, provider.config.name, calls)
                if retry + 1 < policy.max_attempts:
                    reason = result.code if isinstance(result, TransportFailure) else str(result.status_code)
                    self._metrics.retry(model.name, provider.config.name, reason)
                    wait = backoff_s(policy, retry, answered.own_wait_s)
                    await control.pause(min(wait, provider.timeout_s))
        assert last is not None
        result, model = last
        return outcomes.failure(item, result, model.name, model.provider, calls)

    async def _traced_call(self, call: _Call, retry: int, n: int, kept: list[spans.Attempt]) -> _Answered:
        """`_call`, kept for the item's trace (timed from when the call may start)."""
        slot = await self._slot(call)
        started_ns = time.time_ns()
        answered = await self._send(call, slot, traced=True)
        result = answered.result if isinstance(answered.result, UpstreamAnswer) else answered.result.code
        where = (call.item, call.model, call.provider.config, call.request)
        kept.append(spans.Attempt(*where, retry, n, started_ns, time.time_ns(), result))
        return answered

    async def _call(self, call: _Call) -> _Answered:
        return await self._send(call, await self._slot(call))

    async def _slot(self, call: _Call) -> Slot:
        """Wait for the call's turn; the last check that its batch still runs comes right
        after (no await between it and the request going out)."""
        if call.control.stop.is_set():
            raise _Stopped
        try:
            slot = await self.dispatcher.acquire(
                call.provider.lane, call.rank, call.estimate, call.control.waiting_on
            )
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if call.control.stop.is_set() and task is not None and not task.cancelling():
                raise _Stopped from None  # halted while waiting, not cancelled itself
            raise
        if call.control.stop.is_set():
            slot.key.refund(call.estimate)
            self.dispatcher.release(slot, None)
            raise _Stopped
        call.control.started = True
        return slot

    async def _send(self, call: _Call, slot: Slot, traced: bool = False) -> _Answered:
        """One upstream call on a granted slot, which it hands back."""
        provider, request, key = call.provider, call.request, slot.key
        rate_limited: bool | None = None
        try:
            headers = {**request.headers, **provider.adapter.auth(key.secret)}
            started = time.monotonic()
            if traced:
                spans.carry_trace(headers)
            answered = await exchange.post(
                provider.http(), request, headers, timeout_s=provider.timeout_s, max_answer=self._max_answer
            )
            latency_ms = outcomes.ms_since(started)
            if isinstance(answered, TransportFailure):
                self._observe(call, time.monotonic() - started, 0, answered.code)
                return _Answered(answered, None, latency_ms)
            status, response_headers, raw = answered
            self._observe(call, time.monotonic() - started, status, None)
            request_id = provider.adapter.request_id(response_headers) or fallback_request_id()
            answer = provider.adapter.answer(call.item.endpoint, status, raw, request_id)
            own_wait = retry_after_s(response_headers)
            spent = spent_window_s(response_headers, provider.config.rate_limit_cooldown_s)
            if spent is not None:  # the key's window is spent: it rests, a retry waits for it
                provider.lane.keys.rest(key, spent)
                if status == 429:
                    own_wait = 0.0
            elif status == 429:  # over the provider's capacity: the limit learns where it is
                rate_limited = True
            if 200 <= answer.status_code < 300:
                rate_limited = False
                if call.estimate:
                    usage = usage_of(answer.parsed)
                    key.correct(call.estimate, usage.prompt_tokens + usage.completion_tokens)
            return _Answered(answer, own_wait, latency_ms)
        finally:
            self.dispatcher.release(slot, rate_limited)

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
