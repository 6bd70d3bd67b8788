"""Traces of gRPC calls: a server span per handled call, continuing the caller's trace, and a
client span per internal call, with the trace context in its metadata (RPC semantic
conventions). Spans are recorded only where `batchgate.services.common.telemetry` set tracing up.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import grpc
from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.trace import SpanKind, Status, StatusCode

from batchgate.services.common import telemetry

# gRPC codes a server span marks as errors (the caller's mistakes are not the server's).
SERVER_ERROR_CODES = frozenset(
    {
        grpc.StatusCode.UNKNOWN,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.UNIMPLEMENTED,
        grpc.StatusCode.INTERNAL,
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DATA_LOSS,
    }
)


def _rpc_attributes(method: str) -> dict[str, Any]:
    rpc_service, _, rpc_method = method.lstrip("/").rpartition("/")
    return {"rpc.system": "grpc", "rpc.service": rpc_service, "rpc.method": rpc_method}


def set_rpc_status(span: trace.Span | None, code: grpc.StatusCode, server: bool) -> None:
    """RPC semantic conventions: the gRPC status as an attribute; an error status for every
    failed call on the client side, and for the server's own failures on the server side."""
    if span is None or not span.is_recording():
        return
    span.set_attribute("rpc.grpc.status_code", code.value[0])
    if code != grpc.StatusCode.OK and (not server or code in SERVER_ERROR_CODES):
        span.set_status(Status(StatusCode.ERROR, code.name))


def _background(method: str, context: Context | None) -> bool:
    """Whether a call is background work between services outside any trace (leases, results,
    heartbeats from the executors' loops): an internal method with no span current in
    `context` (the current context when None). The sampler would drop its span
    (`UNTRACED_ROOTS`), so none is started: starting and ending a dropped span and injecting
    its context cost 8 µs per call on each side, about what an item's own span costs."""
    if trace.get_current_span(context).get_span_context().is_valid:
        return False
    return method.lstrip("/").startswith(telemetry.UNTRACED_ROOTS)


@contextlib.contextmanager
def server_span(service: str, method: str, context: grpc.aio.ServicerContext) -> Iterator[trace.Span | None]:
    """A server span for one handler of `service`, continuing the caller's trace (W3C
    `traceparent` in the call's metadata)."""
    if not telemetry.tracing(service):
        yield None
        return
    carrier = {k: v for k, v in (context.invocation_metadata() or ()) if isinstance(v, str)}
    caller = propagate.extract(carrier)
    if _background(method, caller):
        yield None
        return
    with telemetry.tracer(service).start_as_current_span(
        method.lstrip("/"),
        context=caller,
        kind=SpanKind.SERVER,
        attributes=_rpc_attributes(method),
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        yield span


class _ClientInterceptor(grpc.aio.UnaryUnaryClientInterceptor):
    """A client span per call and the trace context in its metadata (every internal call is
    unary)."""

    def __init__(self, service: str) -> None:
        self._service = service

    async def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        if not telemetry.tracing(self._service):
            return await continuation(details, request)
        method = details.method.decode() if isinstance(details.method, bytes) else details.method
        if _background(method, None):
            return await continuation(details, request)
        with telemetry.tracer(self._service).start_as_current_span(
            method.lstrip("/"), kind=SpanKind.CLIENT, attributes=_rpc_attributes(method)
        ) as span:
            carrier: dict[str, str] = {}
            propagate.inject(carrier)
            call = await continuation(
                details._replace(metadata=[*(details.metadata or ()), *carrier.items()]), request
            )
            set_rpc_status(span, await call.code(), server=False)
            return call


def client_interceptors(service: str) -> list[grpc.aio.ClientInterceptor]:
    """Interceptors for the channels `service` calls other services on."""
    return [_ClientInterceptor(service)]
