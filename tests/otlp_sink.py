"""Stand-ins for the OpenTelemetry collector: a real OTLP/gRPC server (the `TraceService` and
`MetricsService` of `opentelemetry-proto`) and a real OTLP/HTTP (protobuf) server, each keeping
every span and metric point it receives.

Tests point `OTEL_EXPORTER_OTLP_ENDPOINT` at it to prove what the services export; the
tracing benchmark uses it as its collector.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from concurrent import futures
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import grpc
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2, metrics_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1 import common_pb2

SPAN_KINDS = {0: "unspecified", 1: "internal", 2: "server", 3: "client", 4: "producer", 5: "consumer"}
STATUS_ERROR = 2  # opentelemetry.proto.trace.v1.Status.STATUS_CODE_ERROR


def attribute_value(value: common_pb2.AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [attribute_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: attribute_value(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, kind) if kind else None


def _attributes(pairs: Any) -> dict[str, Any]:
    return {kv.key: attribute_value(kv.value) for kv in pairs}


@dataclass(frozen=True)
class Span:
    service: str
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    """'' for a root span."""
    kind: str
    attributes: dict[str, Any]
    links: list[tuple[str, str]]
    """(trace id, span id) of each linked span."""
    error: bool


@dataclass(frozen=True)
class Point:
    service: str
    metric: str
    attributes: dict[str, Any]
    value: float
    """A sum's or gauge's value; a histogram's count."""
    total: float = 0.0
    """A histogram's sum."""


def _service_name(resource: Any) -> str:
    return str(_attributes(resource.attributes).get("service.name", ""))


def spans_of(request: trace_service_pb2.ExportTraceServiceRequest) -> list[Span]:
    """The spans of one OTLP export, whichever transport brought it."""
    return [
        Span(
            service=_service_name(resource_spans.resource),
            name=s.name,
            trace_id=s.trace_id.hex(),
            span_id=s.span_id.hex(),
            parent_span_id=s.parent_span_id.hex(),
            kind=SPAN_KINDS.get(s.kind, str(s.kind)),
            attributes=_attributes(s.attributes),
            links=[(link.trace_id.hex(), link.span_id.hex()) for link in s.links],
            error=s.status.code == STATUS_ERROR,
        )
        for resource_spans in request.resource_spans
        for scope in resource_spans.scope_spans
        for s in scope.spans
    ]


class _Traces(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, sink: Received) -> None:
        self._sink = sink

    def Export(self, request: Any, context: grpc.ServicerContext) -> Any:
        if self._sink.keep:
            self._sink.add(spans_of(request), [])
        else:
            self._sink.count(request)
        return trace_service_pb2.ExportTraceServiceResponse()


def _points(service: str, metric: Any) -> list[Point]:
    kind = metric.WhichOneof("data")
    points = []
    for point in getattr(metric, kind).data_points:
        if kind in ("sum", "gauge"):
            value = float(point.as_int if point.HasField("as_int") else point.as_double)
            points.append(Point(service, metric.name, _attributes(point.attributes), value))
        else:
            points.append(
                Point(service, metric.name, _attributes(point.attributes), float(point.count), point.sum)
            )
    return points


def points_of(request: metrics_service_pb2.ExportMetricsServiceRequest) -> list[Point]:
    """The metric points of one OTLP export, whichever transport brought it."""
    return [
        point
        for resource_metrics in request.resource_metrics
        for scope in resource_metrics.scope_metrics
        for metric in scope.metrics
        for point in _points(_service_name(resource_metrics.resource), metric)
    ]


class _Metrics(metrics_service_pb2_grpc.MetricsServiceServicer):
    def __init__(self, sink: Received) -> None:
        self._sink = sink

    def Export(self, request: Any, context: grpc.ServicerContext) -> Any:
        self._sink.add([], points_of(request))
        return metrics_service_pb2.ExportMetricsServiceResponse()


class Received:
    """Every span and metric point a sink received, safe across its server threads."""

    def __init__(self, keep: bool = True) -> None:
        self.keep = keep
        """False: spans are only counted (a benchmark's collector: decoding every span into
        Python objects would take CPU from the stack being measured, on the same cores)."""
        self._spans: list[Span] = []
        self._counted = 0
        self._points: list[Point] = []
        self._lock = threading.Lock()
        self.paths: Counter[str] = Counter()
        """HTTP sinks: exports received per URL path."""

    def count(self, request: trace_service_pb2.ExportTraceServiceRequest) -> None:
        """Count the spans of an export without keeping them."""
        spans = sum(len(scope.spans) for rs in request.resource_spans for scope in rs.scope_spans)
        with self._lock:
            self._counted += spans

    def add(self, spans: list[Span], points: list[Point]) -> None:
        with self._lock:
            self._spans += spans
            self._points += points

    def spans(self) -> list[Span]:
        with self._lock:
            return list(self._spans)

    def item_trace(self, custom_id: str, timeout_s: float = 60.0) -> list[Span]:
        """Every span of the record `custom_id`'s trace, once results' record span arrived
        (the last of an item's spans) or `timeout_s` passed."""
        deadline = time.monotonic() + timeout_s
        while True:
            spans = self.spans()
            roots = [s.trace_id for s in spans if s.attributes.get("item.custom_id") == custom_id]
            trace = [s for s in spans if roots and s.trace_id == roots[0]]
            if any(s.name == "batchgate.item.record" for s in trace) or time.monotonic() > deadline:
                return trace
            time.sleep(0.5)

    @property
    def span_count(self) -> int:
        with self._lock:
            return len(self._spans) + self._counted

    def services(self) -> Counter[str]:
        """Spans received per `service.name`."""
        return Counter(span.service for span in self.spans())

    def points(self, metric: str | None = None) -> list[Point]:
        with self._lock:
            return [p for p in self._points if metric is None or p.metric == metric]


class OtlpSink(Received):
    """Serves OTLP/gRPC traces and metrics on 127.0.0.1:`port` while in a `with` block."""

    def __init__(self, port: int, keep: bool = True) -> None:
        super().__init__(keep)
        self.port = port
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(_Traces(self), self._server)
        metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(_Metrics(self), self._server)

    def __enter__(self) -> OtlpSink:
        self._server.add_insecure_port(f"127.0.0.1:{self.port}")
        self._server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.stop(grace=None)


class OtlpHttpSink(Received):
    """Serves OTLP/HTTP with protobuf bodies (`POST <path>` with `application/x-protobuf`) on
    127.0.0.1, on an ephemeral port, while in a `with` block: a path ending in `/v1/traces` or
    `/traces` takes spans, one ending in `metrics` takes metric points; anything else is 404."""

    def __init__(self) -> None:
        super().__init__()
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def _body(self) -> bytes:
                if self.headers.get("transfer-encoding", "").lower() != "chunked":  # Envoy chunks
                    return self.rfile.read(int(self.headers.get("content-length", "0")))
                chunks = []
                while size := int(self.rfile.readline().split(b";")[0], 16):
                    chunks.append(self.rfile.read(size))
                    self.rfile.readline()
                self.rfile.readline()  # the empty line after the last chunk
                return b"".join(chunks)

            def do_POST(self) -> None:
                body = self._body()
                if self.headers.get("content-type") != "application/x-protobuf":
                    return self._answer(415)
                if self.path.endswith("traces"):
                    request: Any = trace_service_pb2.ExportTraceServiceRequest.FromString(body)
                    sink.add(spans_of(request), [])
                    answer: Any = trace_service_pb2.ExportTraceServiceResponse()
                elif self.path.endswith("metrics"):
                    request = metrics_service_pb2.ExportMetricsServiceRequest.FromString(body)
                    sink.add([], points_of(request))
                    answer = metrics_service_pb2.ExportMetricsServiceResponse()
                else:
                    return self._answer(404)
                with sink._lock:
                    sink.paths[self.path] += 1
                self._answer(200, answer.SerializeToString())

            def _answer(self, status: int, payload: bytes = b"") -> None:
                self.send_response(status)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *_args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def __enter__(self) -> OtlpHttpSink:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
