"""Spans handed straight to a service's batch span processor, without the SDK's span object.

`tracer.start_span(...).end()` costs about six times what the finished span it makes costs
to build (the sampler, a lock, attribute validation, the processors' start and end hooks);
with every item traced that was a sixth of each process's CPU. An item's spans need none of
it: whether the trace is sampled was decided when ingest accepted the item (children follow
a sampled parent: parent-based sampling would record them), nothing else runs inside them,
and their attributes are this code base's own, of valid types and few (within the SDK's
limits). So they are built as the SDK's `ReadableSpan` and given to the same
`BatchSpanProcessor`, which exports them with the same OTLP exporter as every other span.
`telemetry.setup` registers each service's processor, resource, instrumentation scope and
id generator here.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, NonRecordingSpan, SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.util.types import AttributeValue


@dataclass(frozen=True)
class _Recorder:
    processor: Any
    resource: Any
    scope: Any
    ids: Any
    span_type: Any
    """`_item_span_type()`, made once (an import in `finished_span` was 2% of a traced
    core's CPU)."""


_recorders: dict[str, _Recorder] = {}
_UNSET = Status(StatusCode.UNSET)  # immutable: one for every span without a status


def register(service: str, processor: Any, resource: Any, scope: Any, ids: Any) -> None:
    _recorders[service] = _Recorder(processor, resource, scope, ids, _item_span_type())


@functools.cache
def _item_span_type() -> type:
    """The SDK's `ReadableSpan` as `finished_span` fills it: no events and nothing dropped
    (class attributes, not the SDK's properties), its own attributes dict and links as they
    are (not a read-only view or a copy made per read). The OTLP encoder asks each span all of
    these, and the properties were a tenth of its time per span."""
    from opentelemetry.sdk.trace import ReadableSpan

    class ItemSpan(ReadableSpan):
        events = ()
        dropped_attributes = dropped_events = dropped_links = 0

        @property
        def attributes(self) -> Any:
            return self._attributes

        @property
        def links(self) -> Any:
            return self._links

    return ItemSpan


def registered(service: str) -> bool:
    return service in _recorders


def clear() -> None:
    _recorders.clear()


def new_context(service: str, parent: SpanContext | None) -> SpanContext:
    """A new span's context: in `parent`'s trace, or a new sampled trace's root when None."""
    ids = _recorders[service].ids
    if parent is None:
        random_id = TraceFlags.RANDOM_TRACE_ID if ids.is_trace_id_random() else 0
        trace_id, flags = ids.generate_trace_id(), TraceFlags(TraceFlags.SAMPLED | random_id)
    else:
        trace_id, flags = parent.trace_id, parent.trace_flags
    return SpanContext(trace_id, ids.generate_span_id(), False, flags)


def finished_span(
    service: str,
    name: str,
    parent: SpanContext | None,
    attributes: dict[str, Any],
    start_ns: int | None = None,
    end_ns: int | None = None,
    kind: SpanKind = SpanKind.INTERNAL,
    status: Status | None = None,
    links: Sequence[Link] = (),
    context: SpanContext | None = None,
) -> SpanContext:
    """A span that is over (`start_ns` to `end_ns`, each now when not given), child of
    `parent` (a new trace's root when None), with `context` when it was made beforehand
    (`new_context`); only for a sampled trace. Returns its context.

    The span keeps `attributes` as it is (the exporter reads it later, on its own thread):
    callers hand over a dict of their own making and do not touch it again. Every caller
    builds one per span anyway, so a copy here was a second one (~22 keys on a run span)."""
    recorder = _recorders[service]
    context = context or new_context(service, parent)
    now = time.time_ns()
    span = recorder.span_type(
        name,
        context,
        parent,
        recorder.resource,
        attributes,
        links=links,
        kind=kind,
        status=status or _UNSET,
        start_time=start_ns or now,
        end_time=end_ns or now,
        instrumentation_scope=recorder.scope,
    )
    recorder.processor.on_end(span)
    return context


class OpenSpan(NonRecordingSpan):
    """A span current while work runs (spans inside it are its children, log lines carry its
    ids), whose attributes and status are gathered meanwhile and recorded once, by `end`
    (`finished_span`)."""

    def __init__(self, service: str, name: str, parent: SpanContext, attributes: Mapping[str, Any]) -> None:
        super().__init__(new_context(service, parent))
        self._service = service
        self._name = name
        self._parent = parent
        self._attributes = dict(attributes)
        self._status: Status | None = None
        self._start_ns = time.time_ns()

    def is_recording(self) -> bool:
        return True

    def set_attribute(self, key: str, value: AttributeValue) -> None:
        self._attributes[key] = value

    def set_attributes(self, attributes: Mapping[str, AttributeValue]) -> None:
        self._attributes.update(attributes)

    def set_status(self, status: Status | StatusCode, description: str | None = None) -> None:
        self._status = status if isinstance(status, Status) else Status(status, description)

    def end(self, end_time: int | None = None) -> None:
        """Record the span. Its attributes go with it: one set after this, which the SDK's
        spans ignore too, lands in a dict of its own instead of the recorded span's."""
        attributes, self._attributes = self._attributes, {}
        finished_span(
            self._service,
            self._name,
            self._parent,
            attributes,
            self._start_ns,
            end_time,
            status=self._status,
            context=self.get_span_context(),
        )


class OpenSpanScope(contextlib.AbstractContextManager[OpenSpan]):
    """An `OpenSpan`, current for the block, recorded when it ends (an exception that ends it
    marks it as an error, as the SDK's spans do). A class rather than generator-based
    context managers: it is on every traced item's run, where three nested generators
    (`use_span` among them) cost half as much again."""

    def __init__(self, service: str, name: str, parent: SpanContext, attributes: Mapping[str, Any]) -> None:
        self._span = OpenSpan(service, name, parent, attributes)
        self._token: object = None

    def __enter__(self) -> OpenSpan:
        self._token = otel_context.attach(trace.set_span_in_context(self._span))
        return self._span

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        otel_context.detach(self._token)  # type: ignore[arg-type]
        if kind is not None:
            self._span.set_status(Status(StatusCode.ERROR, kind.__name__))
        self._span.end()
