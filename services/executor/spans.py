"""The executor's spans of a traced item: its run, one span per upstream attempt (GenAI semantic
conventions) and, inside each, the HTTP call (HTTP client conventions).

Only called for traced items (`telemetry.traced`): an untraced item builds none of this.
Nothing here records a header: the key travels in `Authorization` / `x-api-key`, which no
span sees, and `url.full` is the request URL without user info or query. Prompt and
completion content is recorded only when `trace_record_content` is on.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import orjson
from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from batchgate.internal.v1 import recorder_pb2, scheduler_pb2
from batchgate.services.common import telemetry
from batchgate.services.common.catalogue import ModelConfig, ProviderConfig
from batchgate.services.common.states import ItemState
from batchgate.services.executor.upstream import UpstreamAnswer, UpstreamRequest
from batchgate.services.executor.usage import usage_of

CONTENT_MAX_CHARS = 16384
REQUEST_PARAMETERS = {
    "max_tokens": "gen_ai.request.max_tokens",
    "max_completion_tokens": "gen_ai.request.max_tokens",
    "max_output_tokens": "gen_ai.request.max_tokens",
    "temperature": "gen_ai.request.temperature",
    "top_p": "gen_ai.request.top_p",
    "seed": "gen_ai.request.seed",
}
INPUT_KEYS = ("messages", "input", "prompt")
OUTPUT_KEYS = ("choices", "output", "data")


def _tracer() -> trace.Tracer:
    return telemetry.tracer("executor")


def safe_url(url: str) -> str:
    """`url` without user info, query or fragment (where a key could hide)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _server(url: str) -> dict[str, Any]:
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return {"server.address": parts.hostname or "", "server.port": port}


def provider_name(provider: ProviderConfig) -> str:
    """`gen_ai.provider.name`: the API the provider speaks."""
    return "anthropic" if provider.kind == "anthropic" else "openai"


def run_attributes(item: scheduler_pb2.LeasedItem) -> dict[str, Any]:
    return {
        **telemetry.item_attributes(item.ref.batch_id, item.ref.index, item.custom_id),
        "gen_ai.operation.name": telemetry.gen_ai_operation(item.endpoint),
        "gen_ai.request.model": item.model,
        "batchgate.lease.attempt": item.ref.attempt,
    }


def end_run(span: trace.Span, outcome: recorder_pb2.Outcome) -> None:
    succeeded = outcome.state == recorder_pb2.OUTCOME_STATE_SUCCEEDED
    span.set_attributes(
        {
            "batchgate.outcome": ItemState.SUCCEEDED if succeeded else ItemState.FAILED,
            "batchgate.attempts": outcome.attempts,
            "batchgate.model": outcome.model,
            "batchgate.provider": outcome.provider,
        }
    )
    if not succeeded:
        span.set_status(Status(StatusCode.ERROR, outcome.error_code or f"HTTP {outcome.status_code}"))


def _content(value: Any) -> str:
    return orjson.dumps(value).decode()[:CONTENT_MAX_CHARS]


def _request_attributes(body: bytes, record_content: bool) -> dict[str, Any]:
    try:
        payload = orjson.loads(body)
    except orjson.JSONDecodeError:
        return {}
    if not isinstance(payload, dict):
        return {}
    out: dict[str, Any] = {}
    for key, attribute in REQUEST_PARAMETERS.items():
        value = payload.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            out[attribute] = value
    if record_content:
        given = next((payload[k] for k in INPUT_KEYS if k in payload), None)
        if given is not None:
            out["gen_ai.input.messages"] = _content(given)
    return out


@contextlib.contextmanager
def attempt(
    item: scheduler_pb2.LeasedItem,
    model: ModelConfig,
    provider: ProviderConfig,
    request: UpstreamRequest,
    retry: int,
    number: int,
    record_content: bool,
) -> Iterator[trace.Span]:
    """One upstream attempt of the item's run: `retry` counts the retries of this model,
    `number` the item's upstream calls so far (fallbacks included), from 1."""
    operation = telemetry.gen_ai_operation(item.endpoint)
    upstream_model = model.upstream_model or model.name
    attributes = {
        **telemetry.item_attributes(item.ref.batch_id, item.ref.index, item.custom_id),
        "gen_ai.operation.name": operation,
        "gen_ai.provider.name": provider_name(provider),
        "gen_ai.request.model": upstream_model,
        **_server(request.url),
        **_request_attributes(request.content, record_content),
        "batchgate.model": model.name,
        "batchgate.provider": provider.name,
        "batchgate.retry": retry,
        "batchgate.attempt": number,
    }
    with _tracer().start_as_current_span(
        f"{operation} {upstream_model}", kind=SpanKind.CLIENT, attributes=attributes
    ) as span:
        yield span


def end_attempt(
    span: trace.Span, answer: UpstreamAnswer | None, failure: str | None, record_content: bool
) -> None:
    """What came back: an answer in OpenAI's shape (with its token usage), or the transport
    failure that stood for one."""
    if answer is None:
        span.set_attribute("error.type", failure or "")
        span.set_status(Status(StatusCode.ERROR, failure))
        return
    span.set_attribute("http.response.status_code", answer.status_code)
    if answer.request_id:
        span.set_attribute("batchgate.upstream.request_id", answer.request_id)
    if not 200 <= answer.status_code < 300:
        span.set_attribute("error.type", str(answer.status_code))
        span.set_status(Status(StatusCode.ERROR, str(answer.status_code)))
        return
    parsed = answer.parsed
    if isinstance(parsed.get("id"), str):
        span.set_attribute("gen_ai.response.id", parsed["id"])
    if isinstance(parsed.get("model"), str):
        span.set_attribute("gen_ai.response.model", parsed["model"])
    choices = parsed.get("choices")
    if isinstance(choices, list):
        reasons = [c["finish_reason"] for c in choices if isinstance(c, dict) and c.get("finish_reason")]
        if reasons:
            span.set_attribute("gen_ai.response.finish_reasons", reasons)
    if record_content:
        given = next((parsed[k] for k in OUTPUT_KEYS if k in parsed), None)
        if given is not None:
            span.set_attribute("gen_ai.output.messages", _content(given))
    usage = usage_of(parsed)
    tokens = {
        "gen_ai.usage.input_tokens": usage.prompt_tokens,
        "gen_ai.usage.output_tokens": usage.completion_tokens,
    }
    if usage.cached_tokens:
        tokens["gen_ai.usage.cache_read.input_tokens"] = usage.cached_tokens
    if usage.reasoning_tokens:
        tokens["gen_ai.usage.reasoning.output_tokens"] = usage.reasoning_tokens
    span.set_attributes(tokens)


@contextlib.contextmanager
def http_call(
    url: str, headers: dict[str, str], body_size: int, method: str = "POST"
) -> Iterator[trace.Span]:
    """The HTTP request of an attempt (or of a tool round); puts the trace context into
    `headers` (W3C traceparent, so a server that traces continues the item's trace)."""
    with _tracer().start_as_current_span(
        method,
        kind=SpanKind.CLIENT,
        attributes={
            "http.request.method": method,
            "url.full": safe_url(url),
            **_server(url),
            "http.request.body.size": body_size,
        },
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        propagate.inject(headers)
        yield span


def end_http(span: trace.Span, status: int, headers: Mapping[str, str] | None, error: str | None) -> None:
    """HTTP client conventions: the status, and `error.type` (the status from 400 on, or the
    transport failure)."""
    if status:
        span.set_attribute("http.response.status_code", status)
    if error is None and status >= 400:
        error = str(status)
    if error is not None:
        span.set_attribute("error.type", error)
        span.set_status(Status(StatusCode.ERROR, error))
    if headers is not None and (length := headers.get("content-length")) and length.isdigit():
        span.set_attribute("http.response.body.size", int(length))
