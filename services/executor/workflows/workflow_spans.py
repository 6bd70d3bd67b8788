"""The spans of a traced workflow record, inside its run span: one per step
(`batchgate.workflow.step`, holding its requests and the callback's HTTP request) and one per
request (`batchgate.workflow.request`, holding a span per upstream call of that request). The
callback is named only as `safe_url` writes it; its `authorization` is a header, which no span
records."""

from __future__ import annotations

import contextlib
from typing import Any

from opentelemetry.trace import SpanKind

from batchgate.internal.v1 import scheduler_pb2
from batchgate.services.common import telemetry
from batchgate.services.common.workflow_config import WorkflowConfig
from batchgate.services.executor.spans import safe_url
from batchgate.services.executor.tools.tool_spans import optional_span


def step(
    traced: bool, item: scheduler_pb2.LeasedItem, number: int, config: WorkflowConfig, requests: int
) -> contextlib.AbstractContextManager[Any]:
    """Step `number` (from 0): its `requests` and the callback call that reads their results."""
    attributes = {
        **telemetry.item_attributes(item.ref.batch_id, item.ref.index, item.custom_id),
        "batchgate.workflow.step": number,
        "batchgate.workflow.requests": requests,
        "url.full": safe_url(config.url),
    }
    return optional_span(traced, "batchgate.workflow.step", attributes, SpanKind.INTERNAL)


def request(traced: bool, number: int, request_id: str) -> contextlib.AbstractContextManager[Any]:
    """One request of step `number`, under the id the callback gave it."""
    attributes = {"batchgate.workflow.step": number, "batchgate.workflow.request_id": request_id}
    return optional_span(traced, "batchgate.workflow.request", attributes, SpanKind.INTERNAL)
