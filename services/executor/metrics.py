"""The executor's instruments: upstream call durations (GenAI client conventions), statuses,
retries, tokens, and the items running.

Counts are tallied in plain dicts on the hot path and read by observable counters when the
metrics are collected: one upstream call costs one histogram measurement, not four.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from opentelemetry.metrics import CallbackOptions, Meter, NoOpMeter, Observation

from batchgate.internal.v1 import recorder_pb2

# Upstream latencies: from a fast local model to a long generation.
DURATION_BUCKETS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600)
RESPONSE_KEYS = ("batchgate.provider", "gen_ai.request.model", "http.response.status_code", "error.type")
RETRY_KEYS = ("batchgate.provider", "gen_ai.request.model", "reason")
TOKEN_KEYS = ("batchgate.provider", "gen_ai.request.model", "gen_ai.token.type")


def _observer(tally: Counter[tuple[Any, ...]], keys: tuple[str, ...]) -> Callable[..., Iterable[Observation]]:
    def observe(_options: CallbackOptions) -> Iterable[Observation]:
        snapshot = dict(tally)  # one C-level copy: the event loop keeps counting meanwhile
        return [Observation(count, dict(zip(keys, key, strict=True))) for key, count in snapshot.items()]

    return observe


class ExecutorMetrics:
    def __init__(self, meter: Meter | None = None) -> None:
        meter = meter or NoOpMeter("batchgate")
        self._meter = meter
        self._responses: Counter[tuple[object, ...]] = Counter()
        self._retries: Counter[tuple[object, ...]] = Counter()
        self._tokens: Counter[tuple[object, ...]] = Counter()
        self.operation_duration = meter.create_histogram(
            "gen_ai.client.operation.duration",
            unit="s",
            description="Duration of upstream calls, by operation, model, provider and error.",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        for name, unit, description, tally, keys in (
            (
                "batchgate.upstream.responses",
                "{response}",
                "Upstream calls by provider, model and HTTP status (or transport error).",
                self._responses,
                RESPONSE_KEYS,
            ),
            (
                "batchgate.upstream.retries",
                "{retry}",
                "Upstream calls repeated after a transient failure, by provider, model and reason.",
                self._retries,
                RETRY_KEYS,
            ),
            (
                "batchgate.upstream.tokens",
                "{token}",
                "Tokens of successful upstream calls, input and output.",
                self._tokens,
                TOKEN_KEYS,
            ),
        ):
            meter.create_observable_counter(
                name, callbacks=[_observer(tally, keys)], unit=unit, description=description
            )

    def call(
        self,
        operation: str,
        model: str,
        provider: str,
        kind: str,
        seconds: float,
        status: int,
        error: str | None,
    ) -> None:
        """One upstream call: its duration and how it ended (`error` for a transport failure or a
        status from 400 on)."""
        attributes = {
            "gen_ai.operation.name": operation,
            "gen_ai.request.model": model,
            "gen_ai.provider.name": kind,
            "batchgate.provider": provider,
        }
        if error is not None:
            attributes["error.type"] = error
        self.operation_duration.record(seconds, attributes)
        self._responses[(provider, model, status, error or "")] += 1

    def retry(self, model: str, provider: str, reason: str) -> None:
        self._retries[(provider, model, reason)] += 1

    def tokens(self, model: str, provider: str, usage: recorder_pb2.TokenUsage) -> None:
        self._tokens[(provider, model, "input")] += usage.prompt_tokens
        self._tokens[(provider, model, "output")] += usage.completion_tokens

    def watch_held(self, count: Callable[[], int]) -> None:
        """Report the items this executor holds (leased and not yet acknowledged by results)."""

        def observe(_options: CallbackOptions) -> Iterable[Observation]:
            return [Observation(count())]

        self._meter.create_observable_gauge(
            "batchgate.executor.items",
            callbacks=[observe],
            unit="{item}",
            description=(
                "Items an executor holds: waiting for a slot, running, or finished and not yet recorded."
            ),
        )
