"""The gRPC span exporter sends `SpanEncoder`'s bytes as they are, and still does once the
SDK's exporter made its channel and client anew (as it does on UNAVAILABLE)."""

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


def test_spans_go_out_as_written_also_once_the_channel_is_made_anew(monkeypatch: pytest.MonkeyPatch) -> None:
    port = free_port()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_INSECURE", "true")
    exporter = span_exporter()
    try:
        with OtlpSink(port) as sink:
            assert exporter.export([_span("batchgate.item.record", 1)]) is SpanExportResult.SUCCESS
            # What the SDK's exporter does on UNAVAILABLE (a collector that went away): a new
            # channel, and a new client made by `_stub`. (Letting it happen for real depends on
            # gRPC's reconnect backoff racing the export's deadline.)
            exporter._initialize_channel_and_stub()
            assert exporter.export([_span("batchgate.item.record", 2)]) is SpanExportResult.SUCCESS
        spans = sink.spans()
    finally:
        exporter.shutdown()
    assert [(s.service, s.name, s.attributes["item.index"]) for s in spans] == [
        ("batchgate-results", "batchgate.item.record", 1),
        ("batchgate-results", "batchgate.item.record", 2),
    ]
