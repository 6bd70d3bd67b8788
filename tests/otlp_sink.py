"""A stand-in for the OpenTelemetry collector: a real OTLP/gRPC server that records who sent what.

Tests point `OTEL_EXPORTER_OTLP_ENDPOINT` at it to prove that the services export their
telemetry where the deployment says it goes.
"""

from __future__ import annotations

import threading
from collections import Counter
from concurrent import futures
from typing import Any

import grpc
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2, metrics_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc


def _service_name(resource: Any) -> str:
    for attribute in resource.attributes:
        if attribute.key == "service.name":
            return str(attribute.value.string_value)
    return ""


class _Traces(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, sink: OtlpSink) -> None:
        self._sink = sink

    def Export(self, request: Any, context: grpc.ServicerContext) -> Any:
        for resource_spans in request.resource_spans:
            count = sum(len(scope.spans) for scope in resource_spans.scope_spans)
            self._sink.record(self._sink.spans, resource_spans.resource, count)
        return trace_service_pb2.ExportTraceServiceResponse()


class _Metrics(metrics_service_pb2_grpc.MetricsServiceServicer):
    def __init__(self, sink: OtlpSink) -> None:
        self._sink = sink

    def Export(self, request: Any, context: grpc.ServicerContext) -> Any:
        for resource_metrics in request.resource_metrics:
            count = sum(len(scope.metrics) for scope in resource_metrics.scope_metrics)
            self._sink.record(self._sink.metrics, resource_metrics.resource, count)
        return metrics_service_pb2.ExportMetricsServiceResponse()


class OtlpSink:
    """Serves OTLP traces and metrics on 127.0.0.1:`port` while in a `with` block."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.spans: Counter[str] = Counter()
        """Spans received per `service.name`."""
        self.metrics: Counter[str] = Counter()
        """Metrics received per `service.name`."""
        self._lock = threading.Lock()
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(_Traces(self), self._server)
        metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(_Metrics(self), self._server)

    def record(self, counter: Counter[str], resource: Any, count: int) -> None:
        with self._lock:
            counter[_service_name(resource)] += count

    def __enter__(self) -> OtlpSink:
        self._server.add_insecure_port(f"127.0.0.1:{self.port}")
        self._server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.stop(grace=None)
