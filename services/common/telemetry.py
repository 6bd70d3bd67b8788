"""OpenTelemetry setup and the trace-context plumbing between services.

`setup()` configures the SDK from the standard `OTEL_*` environment (exporting only when
`OTEL_EXPORTER_OTLP_ENDPOINT` is set); without it the API's no-op tracer is used and spans
cost next to nothing. gRPC metadata carries W3C `traceparent` both ways: client calls inject
it (`client_interceptors`), server handlers continue it (`server_span`).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from typing import Any

import grpc
from opentelemetry import context as otel_context
from opentelemetry import propagate, trace

log = logging.getLogger(__name__)

_provider: Any = None


def setup(service: str) -> None:
    """Configure tracing for this process as `batchgate-<service>` (idempotent)."""
    global _provider
    if _provider is not None or not os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        return
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import OTELResourceDetector, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", f"batchgate-{service}")})
    resource = resource.merge(OTELResourceDetector().detect())
    _provider = TracerProvider(resource=resource)
    _provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(_provider)
    log.info("tracing to %s", os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"])


def shutdown() -> None:
    """Flush spans still buffered (call on process exit)."""
    if _provider is not None:
        _provider.shutdown()


tracer = trace.get_tracer("batchgate")


class _MetadataGetter:
    def get(self, carrier: dict[str, str], key: str) -> list[str] | None:
        value = carrier.get(key)
        return [value] if value is not None else None

    def keys(self, carrier: dict[str, str]) -> list[str]:
        return list(carrier)


@contextlib.contextmanager
def server_span(method: str, context: grpc.aio.ServicerContext) -> Iterator[None]:
    """Continue the caller's trace for the duration of one handler."""
    carrier = {k: v for k, v in (context.invocation_metadata() or ()) if isinstance(v, str)}
    parent = propagate.extract(carrier, getter=_MetadataGetter())  # type: ignore[arg-type]
    service, _, name = method.lstrip("/").rpartition("/")
    with tracer.start_as_current_span(
        f"{service}/{name}",
        context=parent,
        kind=trace.SpanKind.SERVER,
        attributes={"rpc.system": "grpc", "rpc.service": service, "rpc.method": name},
    ):
        yield


def inject_metadata() -> list[tuple[str, str]]:
    """The current trace context as gRPC metadata."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return list(carrier.items())


class _ClientInterceptor(grpc.aio.UnaryUnaryClientInterceptor):
    async def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        metadata = list(details.metadata or ()) + inject_metadata()
        details = details._replace(metadata=metadata) if hasattr(details, "_replace") else details
        return await continuation(details, request)


def client_interceptors() -> list[grpc.aio.ClientInterceptor]:
    return [_ClientInterceptor()]


def attach_traceparent(traceparent: str | None) -> object | None:
    """Make an item's stored trace current; returns a token for `detach`."""
    if not traceparent:
        return None
    ctx = propagate.extract({"traceparent": traceparent})
    return otel_context.attach(ctx)


def detach(token: object | None) -> None:
    if token is not None:
        otel_context.detach(token)  # type: ignore[arg-type]
