"""Results' instruments: item outcomes, batch durations and finalize time.

`batchgate.items.finished` counts every item once, by how it ended: succeeded and failed as
executors report them, cancelled, expired and rejected when their batch is finalized.
"""

from __future__ import annotations

from collections import Counter

from opentelemetry.metrics import Meter, NoOpMeter

# Batches take from seconds (tests, small jobs) to their whole completion window (24 h).
BATCH_BUCKETS = (1, 5, 15, 60, 300, 900, 1800, 3600, 7200, 14400, 28800, 43200, 86400, 172800)
FINALIZE_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)


def error_code(code: str | None, status: int | None) -> str:
    """An item failure's code for metrics: batchgate's own, or `http_<status>` of the upstream."""
    return code or (f"http_{status}" if status else "")


class ResultsMetrics:
    def __init__(self, meter: Meter | None = None) -> None:
        meter = meter or NoOpMeter("batchgate")
        self.items_finished = meter.create_counter(
            "batchgate.items.finished",
            unit="{item}",
            description="Items by outcome (succeeded, failed, cancelled, expired, rejected) and error code.",
        )
        self.batch_duration = meter.create_histogram(
            "batchgate.batch.duration",
            unit="s",
            description="Time from a batch's creation to its end, by end status.",
            explicit_bucket_boundaries_advisory=BATCH_BUCKETS,
        )
        self.finalize_duration = meter.create_histogram(
            "batchgate.batch.finalize.duration",
            unit="s",
            description="Time to write a batch's output and error files and end it.",
            explicit_bucket_boundaries_advisory=FINALIZE_BUCKETS,
        )

    def finished(self, outcomes: Counter[tuple[str, str]]) -> None:
        """(outcome, error code) → items."""
        for (outcome, code), count in outcomes.items():
            self.items_finished.add(count, {"outcome": outcome, "error_code": code})
