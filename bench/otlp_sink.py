"""A minimal OTLP/gRPC trace receiver that counts spans (the tracing-cost scenario's collector)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from concurrent import futures

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc


class _Sink(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self) -> None:
        self.spans = 0

    def Export(
        self,
        request: trace_service_pb2.ExportTraceServiceRequest,
        context: grpc.ServicerContext,
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        self.spans += sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)
        return trace_service_pb2.ExportTraceServiceResponse()


@contextlib.contextmanager
def otlp_sink(port: int) -> Iterator[_Sink]:
    sink = _Sink()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(sink, server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    try:
        yield sink
    finally:
        server.stop(2)
