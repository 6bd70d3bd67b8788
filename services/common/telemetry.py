"""OpenTelemetry: tracer and meter setup, item traces, and the trace context between services.

Configuration is the standard `OTEL_*` environment: spans and metrics go out over OTLP (gRPC,
or HTTP/protobuf with `OTEL_EXPORTER_OTLP_PROTOCOL`: `otlp_exporters`) when
`OTEL_EXPORTER_OTLP_ENDPOINT` (or the per-signal variant) is set and not at all otherwise;
`OTEL_SDK_DISABLED=true` or `OTEL_{TRACES,METRICS}_EXPORTER=none` turn a signal off, and the
exporter and batch processor read their own `OTEL_EXPORTER_OTLP_*` / `OTEL_BSP_*`
variables. Each hosted service gets its own tracer and meter provider with
`service.name = batchgate-<service>`, so the embedded process that hosts ingest, scheduler and
results still shows three services. Metrics are also served for Prometheus when
`metrics_port` is set.

Every item has its own trace. Ingest starts it when it accepts the item (`start_item_trace`,
linked to the create call's span) and stores its W3C `traceparent` with the item; the
scheduler, executor and results continue it from that string (`record_child_span`,
`child_span`), each handing the next one its own span's traceparent. Spans that are over
when they are made (acceptance, lease, record, the executor's upstream calls) skip the
tracer and go straight to the batch span processor (`span_records`): most of an item's
spans, at a sixth of the cost. Whether an item is
traced is decided once, at acceptance, by `trace_sample_ratio`: an unsampled item stores no
traceparent, and no service makes a span object for it. Every other span follows its parent
(parent-based sampling); roots other than items follow `OTEL_TRACES_SAMPLER`, except
internal background calls (lease polls, result reports, finalize requests) and health
probes, which never start a trace.

No secret is recorded: spans carry only the attributes set explicitly in this code base, and
none of them holds an API key, an upstream key or an Authorization header.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import metrics, trace
from opentelemetry.trace import Link, NonRecordingSpan, SpanContext, TraceFlags

from batchgate.services.common import span_records
from batchgate.services.common.config import Settings
from batchgate.services.common.otlp_exporters import metric_exporter, signal_on, span_exporter

log = logging.getLogger(__name__)

INSTRUMENTATION = "batchgate"
ITEM_ACCEPT = "batchgate.item.accept"
"""The span that opens an item's trace (ingest)."""
UNTRACED_ROOTS = ("batchgate.internal.", "grpc.health.")
"""Calls that never start a trace: background work between services, health probes."""
# A full batch of spans per export and room for bursts (an accepted batch opens one trace per
# item at once); the OTEL_BSP_* variables override both.
SPAN_QUEUE = 16384
SPAN_EXPORT_BATCH = 2048
# Boundaries of the services' histograms in seconds: each passes one (or its own) as
# `explicit_bucket_boundaries_advisory`, since the SDK's default (0, 5, 10, … 10000) is shaped
# for milliseconds and would put every sub-second observation in one bucket.
STEP_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
"""A step's own work (checking and storing a batch): milliseconds, up to minutes for a big one."""
WAIT_BUCKETS = (*STEP_BUCKETS[:10], 15, 60, 300, 900, 1800, 3600, 7200, 14400, 28800, 43200, 86400, 172800)
"""Waiting in the queue: from an immediate lease to a batch's whole completion window (24 h)."""
SHUTDOWN_FLUSH_S = 3.0
"""How long a stopping process waits for its last spans and metrics to leave: the SDK's own
limits (30 s, with retries) made a stack whose collector had gone take 20 s to stop. Only
`shutdown` flushes: the providers' own exit hooks are off, or they would wait again."""
_tracer_providers: dict[str, Any] = {}
_tracers: dict[str, trace.Tracer] = {}  # one per provider: getting a tracer costs more than a span
_meter_providers: dict[str, Any] = {}
_prometheus_server: Any = None
_prometheus_tried = False
_item_ratio = 0.0


def _service_name(service: str, hosted: Sequence[str]) -> str:
    """`batchgate-<service>`; `OTEL_SERVICE_NAME` renames a process that hosts one service."""
    override = os.environ.get("OTEL_SERVICE_NAME")
    return override if override and len(hosted) == 1 else f"batchgate-{service}"


def _sampler() -> Any:
    from opentelemetry.sdk.trace.sampling import (
        Decision,
        ParentBased,
        Sampler,
        SamplingResult,
        _get_from_env_or_default,
    )

    configured = _get_from_env_or_default()

    class RootSampler(Sampler):
        """Roots only (children follow their parent): an internal background call or a
        health probe never, anything else as configured. (An item's root is no span the
        tracer starts: `start_item_trace` decided already.)"""

        def should_sample(
            self,
            parent_context: Any,
            trace_id: int,
            name: str,
            kind: Any = None,
            attributes: Any = None,
            links: Any = None,
            trace_state: Any = None,
        ) -> SamplingResult:
            if name.startswith(UNTRACED_ROOTS):
                return SamplingResult(Decision.DROP)
            return configured.should_sample(
                parent_context, trace_id, name, kind, attributes, links, trace_state
            )

        def get_description(self) -> str:
            return f"BatchgateRoot({configured.get_description()})"

    return ParentBased(root=RootSampler())


def _resource(service_name: str) -> Any:
    """The service's resource, hashed once: the OTLP encoder groups spans by resource and
    hashes it for every span it encodes, and the SDK's hash is a sorted JSON dump of the
    attributes (a tenth of the encoder's time here); a process's resource never changes."""
    from opentelemetry.sdk.resources import Resource

    class HashedOnce(Resource):
        def __init__(self, attributes: Any, schema_url: str | None = None) -> None:
            super().__init__(attributes, schema_url)
            self._hash = super().__hash__()

        def __hash__(self) -> int:
            return self._hash

    created = Resource.create({"service.name": service_name, "service.namespace": "batchgate"})
    return HashedOnce(created.attributes, created.schema_url)


def _span_processor() -> Any:
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    queue = int(os.environ.get("OTEL_BSP_MAX_QUEUE_SIZE") or SPAN_QUEUE)
    batch = int(os.environ.get("OTEL_BSP_MAX_EXPORT_BATCH_SIZE") or min(SPAN_EXPORT_BATCH, queue))
    return BatchSpanProcessor(span_exporter(), max_queue_size=queue, max_export_batch_size=batch)


def _prometheus_reader(port: int, host: str) -> Any | None:
    """A reader for one service's meter provider, served on the process's scrape endpoint."""
    global _prometheus_server, _prometheus_tried
    from opentelemetry.exporter.prometheus import PrometheusMetricReader
    from prometheus_client import start_http_server

    if not _prometheus_tried:  # the process's one endpoint (a taken port is said once)
        _prometheus_tried = True
        try:
            _prometheus_server = start_http_server(port, addr=host)
            log.info("Prometheus metrics on http://%s:%d/metrics", host, port)
        except OSError as exc:
            log.warning("no Prometheus endpoint on %s:%d: %s", host, port, exc)
    if _prometheus_server is None:
        return None
    # One collector per service in the default registry: metric names differ between services,
    # and each series carries its service as the `service_name` label.
    return PrometheusMetricReader(
        disable_target_info=True,
        scope_info_enabled=False,
        resource_attribute_filter=lambda key: key == "service.name",
    )


def metrics_port(settings: Settings, services: Sequence[str], executor_index: int = 0) -> int:
    """The scrape port of a process hosting `services` (0: none): executors are offset so that
    several of them and the core process fit on one host."""
    if not settings.metrics_port or list(services) != ["executor"]:
        return settings.metrics_port
    return settings.metrics_port + 1 + executor_index


def setup(services: Sequence[str], settings: Settings, executor_index: int = 0) -> None:
    """Configure tracing and metrics for each service this process hosts (once per process)."""
    global _item_ratio
    _item_ratio = settings.trace_sample_ratio
    traces = signal_on("TRACES")
    otlp_metrics = signal_on("METRICS")
    port = metrics_port(settings, services, executor_index)
    for service in services:
        if service in _tracer_providers or service in _meter_providers:
            continue
        resource = _resource(_service_name(service, services))
        if traces:
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.util.instrumentation import InstrumentationScope

            provider = TracerProvider(resource=resource, sampler=_sampler(), shutdown_on_exit=False)
            processor = _span_processor()
            provider.add_span_processor(processor)
            _tracer_providers[service] = provider
            _tracers[service] = provider.get_tracer(INSTRUMENTATION)
            scope = InstrumentationScope(INSTRUMENTATION)
            span_records.register(service, processor, resource, scope, provider.id_generator)
        readers: list[Any] = []
        if otlp_metrics:
            from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

            readers.append(PeriodicExportingMetricReader(metric_exporter()))
        if port and (prometheus := _prometheus_reader(port, settings.metrics_host)) is not None:
            readers.append(prometheus)
        if readers:
            from opentelemetry.sdk.metrics import MeterProvider

            _meter_providers[service] = MeterProvider(
                resource=resource, metric_readers=readers, shutdown_on_exit=False
            )
    if traces:
        log.info("tracing %s; items sampled at %g", ", ".join(services), _item_ratio)


def _shut(providers: Sequence[Any]) -> None:
    for provider in providers:
        try:
            provider.shutdown()
        except Exception:  # exiting anyway: a collector that is gone must not hide the real exit
            log.warning("telemetry shutdown failed", exc_info=True)


def shutdown(flush_s: float = SHUTDOWN_FLUSH_S) -> None:
    """Flush what is buffered (call on process exit), for at most `flush_s`: the providers shut
    down on a daemon thread, so an unreachable collector's retries do not hold the exit."""
    global _prometheus_server, _prometheus_tried
    providers = (*_tracer_providers.values(), *_meter_providers.values())
    if providers:
        flushing = threading.Thread(target=_shut, args=(providers,), name="telemetry-shutdown", daemon=True)
        flushing.start()
        flushing.join(flush_s)
        if flushing.is_alive():
            log.warning(
                "telemetry: the last spans and metrics were not exported within %gs; exiting", flush_s
            )
    _tracer_providers.clear()
    _tracers.clear()
    span_records.clear()
    _meter_providers.clear()
    if _prometheus_server is not None:
        server, _thread = _prometheus_server
        server.shutdown()
        _prometheus_server = None
    _prometheus_tried = False


def tracing(service: str) -> bool:
    """Whether `service` records spans in this process."""
    return service in _tracer_providers


def tracer(service: str) -> trace.Tracer:
    return _tracers.get(service) or trace.NoOpTracer()


def meter(service: str) -> metrics.Meter:
    """`service`'s meter; a no-op one when its metrics go nowhere."""
    provider = _meter_providers.get(service)
    return provider.get_meter(INSTRUMENTATION) if provider is not None else metrics.NoOpMeter(INSTRUMENTATION)


# --- items ------------------------------------------------------------------------------------


def item_attributes(batch_id: str, index: int, custom_id: str) -> dict[str, Any]:
    """What every span of an item carries, whatever the service."""
    return {"batch.id": batch_id, "item.index": index, "item.custom_id": custom_id}


GEN_AI_OPERATIONS = {
    "/v1/chat/completions": "chat",
    "/v1/responses": "chat",
    "/v1/completions": "text_completion",
    "/v1/embeddings": "embeddings",
}


def gen_ai_operation(endpoint: str) -> str:
    """`gen_ai.operation.name` (GenAI semantic conventions) of a batch endpoint."""
    return GEN_AI_OPERATIONS.get(endpoint, "chat")


def sampled(traceparent: str | None) -> bool:
    """Whether a stored traceparent names a sampled span (its flags' lowest bit; the next one
    is W3C's "random trace id" flag)."""
    return bool(traceparent) and int(traceparent[-2:], 16) & 1 == 1  # type: ignore[index]


def traced(service: str, traceparent: str | None) -> bool:
    """Whether `service` records spans in the trace of a stored traceparent (an item's, a
    batch's create call)."""
    return sampled(traceparent) and service in _tracer_providers


def traceparent_of(span: trace.Span) -> str:
    return _traceparent(span.get_span_context())


def _remote(traceparent: str) -> SpanContext:
    """The (remote) span a traceparent names."""
    _version, trace_id, span_id, flags = traceparent.split("-")
    return SpanContext(int(trace_id, 16), int(span_id, 16), True, TraceFlags(int(flags, 16)))


def _parent(traceparent: str) -> otel_context.Context:
    """The context whose current span is the (remote) span a traceparent names."""
    return trace.set_span_in_context(NonRecordingSpan(_remote(traceparent)), otel_context.Context())


def sample_new_item(service: str) -> bool:
    """Whether to trace an item being accepted (`trace_sample_ratio`); ask before building
    anything for its trace, so an untraced item costs one random number."""
    return service in _tracer_providers and random.random() < _item_ratio


def start_item_trace(service: str, attributes: dict[str, Any]) -> str:
    """Open a sampled item's trace: a root span, linked to the current span (the create call),
    ended at once (it keeps `attributes`). Returns its traceparent, to store with the item."""
    if not span_records.registered(service):
        return ""
    create = trace.get_current_span().get_span_context()
    links = (Link(create),) if create.is_valid and create.trace_flags.sampled else ()
    return _traceparent(span_records.finished_span(service, ITEM_ACCEPT, None, attributes, links=links))


def record_child_span(
    service: str,
    name: str,
    traceparent: str | None,
    attributes: dict[str, Any],
    start_ns: int | None = None,
) -> str | None:
    """A finished span (from `start_ns` to now), child of the stored span `traceparent` names;
    returns the new span's traceparent (None when that trace is not sampled, or when `service`
    does not trace). The span keeps `attributes`: pass a dict made for it."""
    if not traced(service, traceparent):
        return None
    parent = _remote(traceparent or "")
    return _traceparent(span_records.finished_span(service, name, parent, attributes, start_ns))


def _traceparent(ctx: SpanContext) -> str:
    # %-formatting: 0.48 µs against an f-string's 0.69 (on every traced item's spans)
    return "00-%032x-%016x-%02x" % (ctx.trace_id, ctx.span_id, ctx.trace_flags)  # noqa: UP031


@contextlib.contextmanager
def child_span(
    service: str, name: str, traceparent: str | None, attributes: Mapping[str, Any]
) -> Iterator[trace.Span | None]:
    """A child of the stored span `traceparent` names, current for the block (so spans and logs
    inside it join the trace); yields None, and costs nothing, when that trace is not sampled."""
    if not traced(service, traceparent):
        yield None
        return
    with tracer(service).start_as_current_span(
        name,
        context=_parent(traceparent),  # type: ignore[arg-type]
        attributes=attributes,
    ) as span:
        yield span


def open_child_span(
    service: str, name: str, traceparent: str | None, attributes: Mapping[str, Any]
) -> contextlib.AbstractContextManager[trace.Span | None]:
    """`child_span` for a span that gathers its attributes while the block runs and is
    recorded when it ends (`span_records.OpenSpan`: no SDK span object); gives None, and
    costs nothing, when that trace is not sampled."""
    if not traced(service, traceparent):
        return contextlib.nullcontext()
    return span_records.OpenSpanScope(service, name, _remote(traceparent or ""), attributes)


def current_traceparent() -> str:
    """The current span's traceparent when it is sampled, else ''."""
    span = trace.get_current_span()
    return traceparent_of(span) if span.get_span_context().trace_flags.sampled else ""
