"""Ingest's instruments: batches created, their records accepted or rejected, create time, and
the runs of recurring templates."""

from __future__ import annotations

from collections import Counter

from opentelemetry.metrics import Meter, NoOpMeter

from batchgate.services.common.states import ItemState
from batchgate.services.common.telemetry import STEP_BUCKETS


class IngestMetrics:
    def __init__(self, meter: Meter | None = None) -> None:
        meter = meter or NoOpMeter("batchgate")
        self.batches_created = meter.create_counter(
            "batchgate.batches.created",
            unit="{batch}",
            description="Batches created, by endpoint and priority.",
        )
        self.records = meter.create_counter(
            "batchgate.ingest.records",
            unit="{record}",
            description="Records of created batches: accepted, or rejected with the rejection code.",
        )
        self.template_runs = meter.create_counter(
            "batchgate.template.runs",
            unit="{run}",
            description="Due times of recurring templates: a run created, refused, or the template paused.",
        )
        self.create_duration = meter.create_histogram(
            "batchgate.batch.create.duration",
            unit="s",
            description="Time to check and store a batch's records (POST /v1/batches).",
            explicit_bucket_boundaries_advisory=STEP_BUCKETS,
        )

    def created(
        self, endpoint: str, priority: str, accepted: int, rejected: Counter[str], seconds: float
    ) -> None:
        self.batches_created.add(1, {"endpoint": endpoint, "priority": priority})
        self.records.add(accepted, {"outcome": "accepted"})
        for code, count in rejected.items():
            self.records.add(count, {"outcome": ItemState.REJECTED, "error_code": code})
        self.create_duration.record(seconds, {"endpoint": endpoint})
