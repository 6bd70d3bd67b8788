"""`SpanEncoder` writes the export request the SDK's OTLP encoder would: both encodings of the
same spans, parsed by the OTLP message classes, are equal, for the spans the fast path writes
and for those it hands to the SDK's encoder."""

from __future__ import annotations

import enum
import random

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags, TraceState

from batchgate.services.common.otlp_span_encoding import VALUES_PER_KEY, SpanEncoder
from batchgate.services.common.states import ItemState

EXECUTOR = Resource.create({"service.name": "batchgate-executor"})
RESULTS = Resource(
    {"service.name": "batchgate-results"}, schema_url="https://opentelemetry.io/schemas/1.30.0"
)
SCOPE = InstrumentationScope("batchgate")
OTHER_SCOPE = InstrumentationScope("other", "1.2", "https://opentelemetry.io/schemas/1.21.0")


def _context(remote: bool = False, state: TraceState | None = None) -> SpanContext:
    return SpanContext(random.getrandbits(128), random.getrandbits(64), remote, TraceFlags(0x03), state)


def _span(index: int, **overrides: object) -> ReadableSpan:
    fields: dict[str, object] = {
        "name": "batchgate.item.run",
        "context": _context(),
        "parent": _context(remote=index % 2 == 0),
        "resource": EXECUTOR,
        "attributes": {
            "batch.id": "batch_8f3a2c1d9e7b4a60",
            "item.index": index,
            "item.custom_id": f"request-{index}",
            "gen_ai.request.model": "gpt-4o-mini",
            "server.port": 8123,
            "gen_ai.request.temperature": 0.25,
            "batchgate.cost_usd": 1.5e-05,
            "gen_ai.response.finish_reasons": ["stop", "length"],
            "batchgate.flags": (True, False),
            "batchgate.retry": 0,
            "batchgate.delta": -3,
            "batchgate.big": 2**63 - 1,
            "batchgate.cached": index % 3 == 0,
            "gen_ai.input.messages": "é" * 90 + "x" * (index * 40),  # lengths of 1, 2 and 3 bytes
            "batchgate.empty": "",
        },
        "kind": SpanKind.CLIENT,
        "status": Status(StatusCode.UNSET),
        "start_time": 1_796_436_583_329_262_864 + index,
        "end_time": 1_796_436_583_429_262_864 + index,
        "instrumentation_scope": SCOPE,
    }
    fields.update(overrides)
    return ReadableSpan(**fields)  # type: ignore[arg-type]


def _same(spans: list[ReadableSpan], encoder: SpanEncoder | None = None) -> None:
    written = (encoder or SpanEncoder()).request(spans)
    assert ExportTraceServiceRequest.FromString(written) == encode_spans(spans)


def test_item_spans_encode_as_the_sdk_encodes_them() -> None:
    _same([_span(index) for index in range(12)])


def test_every_span_kind_status_parent_and_link() -> None:
    spans = [_span(0, kind=kind, parent=None) for kind in SpanKind] + [
        _span(1, status=Status(StatusCode.ERROR, "HTTP 503")),
        _span(2, status=Status(StatusCode.ERROR)),
        _span(3, status=Status(StatusCode.OK)),
        _span(4, links=(Link(_context()), Link(_context(remote=True)))),
        _span(5, attributes={}, name="é" * 200),
    ]
    _same(spans)


def test_spans_group_by_resource_then_scope() -> None:
    spans = [
        _span(0),
        _span(1, resource=RESULTS),
        _span(2, instrumentation_scope=OTHER_SCOPE),
        _span(3, resource=RESULTS, instrumentation_scope=None),
        _span(4),
    ]
    _same(spans)


class Tier(enum.IntEnum):
    STANDARD = 2


def test_an_enum_member_is_its_value() -> None:
    _same([_span(0, attributes={"batchgate.outcome": ItemState.SUCCEEDED, "tier": Tier.STANDARD})] * 2)


def test_what_the_fast_path_does_not_write_is_encoded_by_the_sdk() -> None:
    provider = TracerProvider(resource=EXECUTOR)
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("batchgate")
    with tracer.start_as_current_span("with an event", attributes={"a": 1}) as span:
        span.add_event("retry", {"attempt": 2})
        span.record_exception(ValueError("boom"))
    tracer.start_span("linked", links=[Link(_context(), {"link.kind": "create"})]).end()
    tracer.start_span("a mapping", attributes={"ok": "yes"}).end()
    spans = [
        *memory.get_finished_spans(),
        _span(0, context=_context(state=TraceState([("vendor", "value")]))),
        _span(1, attributes={"bytes": b"\x00\x01", "batch.id": "b"}),
        _span(2, attributes={"mixed": [1, "two"]}),
        _span(4, attributes={"past int64": 2**70, "kept": 1}),
        _span(5, attributes={"not unicode": "\ud800", "kept": 1}),
        _span(3),
    ]
    _same(spans)


def test_kept_attribute_bytes_start_over_and_stay_right() -> None:
    encoder = SpanEncoder()
    for round_ in range(3):  # the same values again (kept), then new ones past the bound
        spans = [_span(index + round_ * VALUES_PER_KEY) for index in range(VALUES_PER_KEY + 10)]
        _same(spans, encoder)
        _same(spans, encoder)


def test_equal_values_of_other_types_are_not_taken_for_each_other() -> None:
    """1, 1.0 and True are one key of a dict, ("a",) and a str enum's tuple are equal: the
    kept bytes are used only for a value of the same type."""
    encoder = SpanEncoder()
    values: list[object] = [1, 1.0, True, (1,), (True,), (1.0,), ("stop",), ["stop"], ("succeeded",)]
    values += [(ItemState.SUCCEEDED,), "succeeded", ItemState.SUCCEEDED]
    for _ in range(2):  # written, then kept
        _same([_span(index, attributes={"key": value}) for index, value in enumerate(values)], encoder)


def test_an_empty_request() -> None:
    _same([])
