"""The spans of a traced tool-calling record, inside its run span: one per model turn
(`batchgate.tool.turn`, holding a span per upstream call of that turn) and one per tool round
(`batchgate.tool.round`, holding its HTTP requests; for MCP one `execute_tool {name}` span per
call, GenAI conventions). Attributes name the tool server only as `safe_url` writes it; the
record's `authorization` is a header, which no span records. An untraced record gets none
(every helper yields None at no cost)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import SpanKind

from batchgate.internal.v1 import scheduler_pb2
from batchgate.services.common import telemetry
from batchgate.services.common.tool_config import ToolConfig
from batchgate.services.executor.spans import safe_url


@contextlib.contextmanager
def optional_span(
    traced: bool, name: str, attributes: dict[str, Any], kind: SpanKind
) -> Iterator[trace.Span | None]:
    """A span of the executor's tracer when the record is traced, else None at no cost."""
    if not traced:
        yield None
        return
    with telemetry.tracer("executor").start_as_current_span(name, kind=kind, attributes=attributes) as span:
        yield span


def model_turn(
    traced: bool, item: scheduler_pb2.LeasedItem, number: int
) -> contextlib.AbstractContextManager[Any]:
    """Model turn `number` (from 1) of the record's tool loop."""
    attributes = {
        **telemetry.item_attributes(item.ref.batch_id, item.ref.index, item.custom_id),
        "batchgate.tool.turn": number,
    }
    return optional_span(traced, "batchgate.tool.turn", attributes, SpanKind.INTERNAL)


def tool_round(
    traced: bool, item: scheduler_pb2.LeasedItem, number: int, config: ToolConfig, calls: int
) -> contextlib.AbstractContextManager[Any]:
    """Tool round `number` (from 1): `calls` tool calls sent to the record's tool server."""
    attributes = {
        **telemetry.item_attributes(item.ref.batch_id, item.ref.index, item.custom_id),
        "batchgate.tool.round": number,
        "batchgate.tool.type": config.type,
        "batchgate.tool.calls": calls,
        "url.full": safe_url(config.url),
    }
    return optional_span(traced, "batchgate.tool.round", attributes, SpanKind.INTERNAL)


def execute_tool(traced: bool, name: str, call_id: str) -> contextlib.AbstractContextManager[Any]:
    """One tool call (GenAI `execute_tool`)."""
    attributes = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.call.id": call_id,
        "gen_ai.tool.type": "function",
    }
    return optional_span(traced, f"execute_tool {name}", attributes, SpanKind.INTERNAL)
