"""OTLP exporters over the protocol the OpenTelemetry SDK configuration asks for.

`OTEL_EXPORTER_OTLP_PROTOCOL` (and its per-signal `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL` /
`OTEL_EXPORTER_OTLP_METRICS_PROTOCOL`, which win) chooses `grpc` or `http/protobuf`, as the
OpenTelemetry specification requires SDKs to offer. Unset, it is `grpc`, what batchgate always
sent (the specification lets an SDK keep its earlier default). The exporters read their own
`OTEL_EXPORTER_OTLP_*` variables, endpoints included: over HTTP, a shared
`OTEL_EXPORTER_OTLP_ENDPOINT` gets `/v1/traces` or `/v1/metrics` appended and a per-signal
endpoint is used as it is. `http/json`, which the Python exporters do not implement, and any
other value are a startup error rather than silently no telemetry.
"""

from __future__ import annotations

import os
from typing import Any

GRPC = "grpc"
HTTP_PROTOBUF = "http/protobuf"
PROTOCOLS = (GRPC, HTTP_PROTOBUF)


def protocol(signal: str) -> str:
    """The OTLP protocol of `signal` (TRACES, METRICS) from the environment."""
    chosen = (
        os.environ.get(f"OTEL_EXPORTER_OTLP_{signal}_PROTOCOL")
        or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or GRPC
    ).strip()
    if chosen not in PROTOCOLS:
        supported = ", ".join(PROTOCOLS)
        raise ValueError(f"OTLP protocol {chosen!r} for {signal.lower()} is not supported; use {supported}")
    return chosen


def span_exporter() -> Any:
    """An OTLP span exporter over the configured protocol."""
    if protocol("TRACES") == HTTP_PROTOBUF:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpans

        return HttpSpans()
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpans

    return GrpcSpans()


def metric_exporter() -> Any:
    """An OTLP metric exporter over the configured protocol."""
    if protocol("METRICS") == HTTP_PROTOBUF:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter as HttpMetrics

        return HttpMetrics()
    from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter as GrpcMetrics

    return GrpcMetrics()
