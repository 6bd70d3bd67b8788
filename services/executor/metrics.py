"""The executor's instruments: upstream calls (GenAI client conventions: operation duration
and token usage), their statuses, retries, and the items running."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from opentelemetry.metrics import CallbackOptions, Meter, NoOpMeter, Observation

from batchgate.internal.v1 import recorder_pb2

# Upstream latencies: from a fast local model to a long generation.
DURATION_BUCKETS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600)
TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304)


class ExecutorMetrics:
    def __init__(self, meter: Meter | None = None) -> None:
        meter = meter or NoOpMeter("batchgate")
        self._meter = meter
        self.operation_duration = meter.create_histogram(
            "gen_ai.client.operation.duration",
            unit="s",
            description="Duration of upstream calls, by operation, model, provider and error.",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        self.token_usage = meter.create_histogram(
            "gen_ai.client.token.usage",
            unit="{token}",
            description="Tokens per successful upstream call, input and output.",
            explicit_bucket_boundaries_advisory=TOKEN_BUCKETS,
        )
        self.responses = meter.create_counter(
            "batchgate.upstream.responses",
            unit="{response}",
            description="Upstream calls by provider, model and HTTP status (or transport error).",
        )
        self.retries = meter.create_counter(
            "batchgate.upstream.retries",
            unit="{retry}",
            description="Upstream calls repeated after a transient failure, by provider, model and reason.",
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
        self.responses.add(
            1,
            {
                "batchgate.provider": provider,
                "gen_ai.request.model": model,
                "http.response.status_code": status,
                "error.type": error or "",
            },
        )

    def tokens(
        self, operation: str, model: str, provider: str, kind: str, usage: recorder_pb2.TokenUsage
    ) -> None:
        base = {
            "gen_ai.operation.name": operation,
            "gen_ai.request.model": model,
            "gen_ai.provider.name": kind,
            "batchgate.provider": provider,
        }
        self.token_usage.record(usage.prompt_tokens, {**base, "gen_ai.token.type": "input"})
        self.token_usage.record(usage.completion_tokens, {**base, "gen_ai.token.type": "output"})

    def watch_in_flight(self, count: Callable[[], int]) -> None:
        """Report the items this executor holds (leased and not yet acknowledged by results)."""

        def observe(_options: CallbackOptions) -> Iterable[Observation]:
            return [Observation(count())]

        self._meter.create_observable_gauge(
            "batchgate.executor.items",
            callbacks=[observe],
            unit="{item}",
            description="Items an executor holds: running, or finished and not yet recorded.",
        )
