"""Sampling and trace continuation (batchgate.services.common.telemetry) against a real OTLP receiver, and
the log formats (batchgate.services.common.logs)."""

from __future__ import annotations

import io
import json
import logging
import time
from collections.abc import Iterator

import pytest
from opentelemetry.trace import SpanKind

from batchgate.services.common import logs, telemetry
from batchgate.services.common.loading import load_settings
from tests.otlp_sink import OtlpSink
from tests.support import free_port

UNSAMPLED = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"


@pytest.fixture
def sink(monkeypatch: pytest.MonkeyPatch) -> Iterator[OtlpSink]:
    port = free_port()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_INSECURE", "true")
    monkeypatch.setenv("OTEL_METRICS_EXPORTER", "none")
    with OtlpSink(port) as receiver:
        yield receiver
        telemetry.shutdown()


def _setup(ratio: float, *services: str) -> None:
    telemetry.setup(list(services), load_settings(environ={"BATCHGATE_TRACE_SAMPLE_RATIO": str(ratio)}))


def _flushed(sink: OtlpSink) -> list:
    telemetry.shutdown()  # flushes every provider
    return sink.spans()


def test_items_are_sampled_by_the_ratio_and_children_follow_the_stored_decision(sink: OtlpSink) -> None:
    _setup(0.5, "ingest", "scheduler")
    decisions = [telemetry.sample_new_item("ingest") for _ in range(2000)]
    assert 700 < sum(decisions) < 1300
    traceparent = telemetry.start_item_trace("ingest", telemetry.item_attributes("batch_1", 3, "c-3"))
    assert telemetry.sampled(traceparent) and telemetry.traced("scheduler", traceparent)
    lease = telemetry.record_child_span("scheduler", "batchgate.item.lease", traceparent, {"item.index": 3})
    assert lease is not None and lease.split("-")[1] == traceparent.split("-")[1]
    # An unsampled item (or none stored) gets no span anywhere.
    assert telemetry.record_child_span("scheduler", "batchgate.item.lease", UNSAMPLED, {}) is None
    assert telemetry.record_child_span("scheduler", "batchgate.item.lease", None, {}) is None
    with telemetry.child_span("scheduler", "x", UNSAMPLED, {}) as span:
        assert span is None
    spans = {s.name: s for s in _flushed(sink)}
    assert set(spans) == {"batchgate.item.accept", "batchgate.item.lease"}
    root, child = spans["batchgate.item.accept"], spans["batchgate.item.lease"]
    assert (root.service, child.service) == ("batchgate-ingest", "batchgate-scheduler")
    assert child.parent_span_id == root.span_id and root.parent_span_id == ""
    assert root.attributes == {"batch.id": "batch_1", "item.index": 3, "item.custom_id": "c-3"}


@pytest.mark.parametrize("ratio", [0.0, 1.0])
def test_ratio_zero_traces_no_item_and_one_traces_every_item(sink: OtlpSink, ratio: float) -> None:
    _setup(ratio, "ingest")
    assert {telemetry.sample_new_item("ingest") for _ in range(200)} == {bool(ratio)}


def test_background_calls_and_health_probes_start_no_trace(
    sink: OtlpSink, monkeypatch: pytest.MonkeyPatch
) -> None:
    _setup(1.0, "scheduler")
    tracer = telemetry.tracer("scheduler")
    for name in (
        "batchgate.internal.v1.SchedulerService/LeaseItems",
        "grpc.health.v1.Health/Check",
        "batchgate.v1.BatchService/GetBatch",
    ):
        with tracer.start_as_current_span(name, kind=SpanKind.SERVER), tracer.start_as_current_span("child"):
            pass
    names = [s.name for s in _flushed(sink)]
    assert sorted(names) == ["batchgate.v1.BatchService/GetBatch", "child"]


def test_other_roots_follow_otel_traces_sampler_items_do_not(
    sink: OtlpSink, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "always_off")
    _setup(1.0, "ingest")
    with telemetry.tracer("ingest").start_as_current_span("batchgate.v1.BatchService/CreateBatch"):
        traceparent = telemetry.start_item_trace("ingest", {})
    assert [s.name for s in _flushed(sink)] == ["batchgate.item.accept"]
    assert telemetry.sampled(traceparent)


def test_nothing_is_set_up_without_an_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    _setup(1.0, "ingest")
    try:
        assert not telemetry.tracing("ingest") and not telemetry.sample_new_item("ingest")
        assert not telemetry.traced("ingest", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
    finally:
        telemetry.shutdown()


def test_log_lines_are_json_with_the_ids_of_a_sampled_span_and_no_secret(sink: OtlpSink) -> None:
    _setup(1.0, "results")
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logs.JsonFormatter("results", logs.Redactor(["sk-upstream-0123456789"])))
    logger = logging.getLogger("test_telemetry")
    logger.addHandler(handler)
    try:
        traceparent = telemetry.start_item_trace("results", {})
        with telemetry.child_span("results", "batchgate.item.record", traceparent, {}) as span:
            logger.warning("recorded", extra={"batch_id": "batch_1", "item_index": 3, "custom_id": "c-3"})
        with telemetry.child_span("results", "batchgate.item.record", UNSAMPLED, {}):
            logger.warning("key sk-upstream-0123456789 and bg-%s and Authorization: Bearer abc.def", "A" * 40)
    finally:
        logger.removeHandler(handler)
    traced, untraced = (json.loads(line) for line in stream.getvalue().splitlines())
    assert span is not None
    assert traced["trace_id"] == f"{span.get_span_context().trace_id:032x}"
    assert traced["span_id"] == f"{span.get_span_context().span_id:016x}"
    assert (traced["batch_id"], traced["item_index"], traced["custom_id"]) == ("batch_1", 3, "c-3")
    assert (traced["level"], traced["service"], traced["message"]) == ("warning", "results", "recorded")
    assert "trace_id" not in untraced
    assert untraced["message"] == "key [REDACTED] and [REDACTED] and Authorization: Bearer [REDACTED]"


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"BATCHGATE_TRACE_SAMPLE_RATIO": "1.5"}, "trace_sample_ratio"),
        ({"BATCHGATE_LOG_FORMAT": "yaml"}, "log_format"),
        ({"BATCHGATE_TRACE_RECORD_CONTENT": "maybe"}, "true or false"),
        ({"BATCHGATE_METRICS_PORT": "70000"}, "metrics_port"),
    ],
)
def test_bad_observability_settings_are_refused(environ: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        load_settings(environ=environ)


def test_metrics_ports_of_the_processes_on_one_host() -> None:
    settings = load_settings(
        environ={"BATCHGATE_METRICS_PORT": "9464", "BATCHGATE_TRACE_RECORD_CONTENT": "on"}
    )
    assert settings.trace_record_content is True
    assert telemetry.metrics_port(settings, ["ingest", "scheduler", "results"]) == 9464
    assert telemetry.metrics_port(settings, ["executor"], 0) == 9465
    assert telemetry.metrics_port(settings, ["executor"], 2) == 9467
    assert telemetry.metrics_port(load_settings(environ={}), ["executor"], 2) == 0


def test_an_open_span_is_current_gathers_its_attributes_and_is_recorded_when_it_ends(
    sink: OtlpSink,
) -> None:
    _setup(1.0, "ingest", "executor")
    traceparent = telemetry.start_item_trace("ingest", {"item.index": 1})
    with telemetry.open_child_span("executor", "batchgate.item.run", traceparent, {"a": 1}) as run:
        assert run is not None and run.is_recording()
        with telemetry.tracer("executor").start_as_current_span("inner"):  # the SDK's own span
            pass
        run.set_attributes({"b": "x"})
        run.set_attribute("a", 2)
        assert telemetry.current_traceparent() == telemetry.traceparent_of(run)
    run.set_attribute("late", True)  # after the end: not on the recorded span (the SDK ignores it)
    with pytest.raises(RuntimeError), telemetry.open_child_span("executor", "failed", traceparent, {}):
        raise RuntimeError("boom")
    with telemetry.open_child_span("executor", "untraced", UNSAMPLED, {}) as nothing:
        assert nothing is None
    spans = {s.name: s for s in _flushed(sink)}
    assert set(spans) == {"batchgate.item.accept", "batchgate.item.run", "inner", "failed"}
    accept, recorded = spans["batchgate.item.accept"], spans["batchgate.item.run"]
    assert (recorded.service, recorded.trace_id, recorded.parent_span_id) == (
        "batchgate-executor",
        accept.trace_id,
        accept.span_id,
    )
    assert recorded.attributes == {"a": 2, "b": "x"} and not recorded.error
    assert spans["inner"].parent_span_id == recorded.span_id  # children of the open span
    assert spans["failed"].error and spans["failed"].parent_span_id == accept.span_id


def test_a_stopping_process_does_not_wait_on_a_collector_that_is_gone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The SDK's shutdown retried the last export for 10 s per signal: a stack whose collector
    had gone took 20 s to stop, and the launcher killed it."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{free_port()}")  # nothing listens
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_INSECURE", "true")
    _setup(1.0, "ingest")
    telemetry.start_item_trace("ingest", telemetry.item_attributes("batch_1", 0, "c-0"))
    telemetry.meter("ingest").create_counter("batchgate.test.count").add(1)
    started = time.monotonic()
    telemetry.shutdown(flush_s=0.5)
    assert time.monotonic() - started < 2.0
    assert not telemetry.tracing("ingest")
