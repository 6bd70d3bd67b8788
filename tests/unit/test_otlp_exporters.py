"""The gRPC span exporter sends `SpanEncoder`'s bytes as they are, and still does after its
collector was away (the SDK's exporter makes its channel and client anew on UNAVAILABLE)."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, TraceFlags

from batchgate.services.common.otlp_exporters import span_exporter
from tests.otlp_sink import OtlpSink
from tests.support import free_port


def _span(name: str, index: int) -> ReadableSpan:
    return ReadableSpan(
        name,
        SpanContext(0x5B8EFFF798038103D269B633813FC60C, 0xEEE19B7EC3C1B170 + index, False, TraceFlags(1)),
        resource=Resource({"service.name": "batchgate-results"}),
        attributes={"item.index": index},
        start_time=1_796_436_583_329_262_864,
        end_time=1_796_436_583_429_262_864,
        instrumentation_scope=InstrumentationScope("batchgate"),
    )


def test_spans_go_out_as_written_and_again_once_the_collector_is_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    port = free_port()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_INSECURE", "true")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "1")
    exporter = span_exporter()
    try:
        assert exporter.export([_span("lost", 0)]) is SpanExportResult.FAILURE  # nobody listens yet
        with OtlpSink(port) as sink:
            assert exporter.export(
                [_span("batchgate.item.record", 1), _span("batchgate.item.record", 2)]
            ) is (SpanExportResult.SUCCESS)
        spans = sink.spans()
    finally:
        exporter.shutdown()
    assert [(s.service, s.name, s.attributes["item.index"]) for s in spans] == [
        ("batchgate-results", "batchgate.item.record", 1),
        ("batchgate-results", "batchgate.item.record", 2),
    ]
