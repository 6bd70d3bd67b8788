"""The services' histograms, read back from the OpenTelemetry SDK: every one in seconds has
boundaries of its own (the SDK's default, 0 … 10000, is shaped for milliseconds and puts every
sub-second observation in one bucket), and sub-second timings land in sub-second buckets."""

from __future__ import annotations

import importlib
import inspect
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from opentelemetry.metrics import Histogram
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader

from batchgate.services.ingest.metrics import IngestMetrics
from batchgate.services.scheduler.metrics import SchedulerMetrics
from tests.unit.test_architecture import MODULES, ROOT, SERVICES

SDK_DEFAULT_BOUNDS = (0, 5, 10, 25, 50, 75, 100, 250, 500, 750, 1000, 2500, 5000, 7500, 10000)


class KeepingMeter:
    """The SDK's own meter, keeping every histogram made through it (instruments stored in a
    dict or made in a loop are found too, not only those kept as attributes)."""

    def __init__(self, meter: Any) -> None:
        self._meter = meter
        self.histograms: list[Histogram] = []

    def create_histogram(self, *args: Any, **kwargs: Any) -> Histogram:
        histogram = self._meter.create_histogram(*args, **kwargs)
        self.histograms.append(histogram)
        return histogram

    def __getattr__(self, name: str) -> Any:
        return getattr(self._meter, name)


@dataclass
class Sdk:
    reader: InMemoryMetricReader
    meter: KeepingMeter


@pytest.fixture
def sdk() -> Iterator[Sdk]:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    yield Sdk(reader, KeepingMeter(provider.get_meter("batchgate")))
    provider.shutdown()


def _points(reader: InMemoryMetricReader) -> dict[str, tuple[str, HistogramDataPoint]]:
    """Histogram name → (unit, its one data point)."""
    data = reader.get_metrics_data()
    found = {}
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    if isinstance(point, HistogramDataPoint):
                        found[metric.name] = (metric.unit or "", point)
    return found


def _metrics_classes() -> list[type]:
    """Every service's instruments class (`services/<service>/metrics.py`, `…Metrics(meter)`)."""
    classes = []
    for service in SERVICES:
        module = importlib.import_module(f"batchgate.services.{service}.metrics")
        classes += [
            cls
            for name, cls in inspect.getmembers(module, inspect.isclass)
            if cls.__module__ == module.__name__ and name.endswith("Metrics")
        ]
    return classes


def test_histograms_are_made_only_in_the_services_metrics_modules() -> None:
    """So that the next test, which makes every service's instruments, sees every histogram."""
    makers = {
        str(relative)
        for relative in MODULES
        if re.search(r"\.create_histogram\(", (ROOT / relative).read_text())
    }
    assert makers <= {f"services/{service}/metrics.py" for service in SERVICES}
    assert makers  # the search itself works


def test_every_histogram_in_seconds_has_boundaries_that_fit_seconds(sdk: Sdk) -> None:
    meter = sdk.meter
    for cls in _metrics_classes():
        cls(meter)
    for histogram in meter.histograms:
        histogram.record(0.02)
    points = _points(sdk.reader)
    assert len(points) == len(meter.histograms) >= 4
    in_seconds = {name: point for name, (unit, point) in points.items() if unit == "s"}
    assert {"batchgate.batch.create.duration", "batchgate.lease.wait"} <= set(in_seconds)
    for name, point in in_seconds.items():
        assert tuple(point.explicit_bounds) != SDK_DEFAULT_BOUNDS, (
            f"{name}: pass explicit_bucket_boundaries_advisory (telemetry.STEP_BUCKETS or WAIT_BUCKETS)"
        )


def _bucket(point: HistogramDataPoint, seconds: float) -> tuple[float, float]:
    """The (lower, upper] bounds of the bucket that counted `seconds` (the only one there)."""
    bounds = [0.0, *point.explicit_bounds, float("inf")]
    (index,) = [i for i, count in enumerate(point.bucket_counts) if count]
    assert bounds[index] < seconds <= bounds[index + 1]
    return bounds[index], bounds[index + 1]


def test_a_batch_create_of_milliseconds_lands_in_a_bucket_of_milliseconds(sdk: Sdk) -> None:
    IngestMetrics(sdk.meter).created("/v1/chat/completions", "standard", 3, Counter(), 0.02)
    _unit, point = _points(sdk.reader)["batchgate.batch.create.duration"]
    assert _bucket(point, 0.02) == (0.01, 0.025)


@pytest.mark.parametrize("seconds, bucket", [(0.02, (0.01, 0.025)), (0.4, (0.25, 0.5)), (7000, (3600, 7200))])
def test_a_lease_wait_lands_in_a_bucket_of_its_size(
    sdk: Sdk, seconds: float, bucket: tuple[float, float]
) -> None:
    SchedulerMetrics(sdk.meter).lease_wait.record(seconds, {"priority": "standard"})
    _unit, point = _points(sdk.reader)["batchgate.lease.wait"]
    assert _bucket(point, seconds) == bucket
