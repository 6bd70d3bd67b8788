"""One trace per item across the four services, metrics of the outcomes, logs that lead to traces.

A real OTLP receiver (`tests.otlp_sink`) on loopback collects what the real service processes
export while a batch runs through Envoy: on SQLite the embedded process (ingest, scheduler and
results, each its own `service.name`) and an executor; on PostgreSQL every service in its own
process.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.execution_support import write_catalogue
from tests.otlp_sink import OtlpSink, Point, Span
from tests.support import (
    RunningStack,
    chat_records,
    free_port,
    free_port_run,
    fresh_database,
    replicated_stack,
    running_stack,
    upload,
    wait_for_batch,
)

SERVICES = {"batchgate-ingest", "batchgate-scheduler", "batchgate-executor", "batchgate-results"}
UPSTREAM_KEY = f"sk-upstream-{secrets.token_hex(16)}"
# The client's own trace, which the create call continues (W3C traceparent through Envoy).
CLIENT_TRACE = secrets.token_hex(16)
CLIENT_SPAN = secrets.token_hex(8)
ITEM_SPANS = ("batchgate.item.accept", "batchgate.item.lease", "batchgate.item.run", "batchgate.item.record")
# The GenAI and HTTP client attributes of an upstream call: on its own span, or on the run
# span of a record whose run made that one call.
CALL_ATTRIBUTES = (
    "gen_ai.operation.name",
    "gen_ai.provider.name",
    "gen_ai.request.model",
    "http.request.method",
    "url.full",
    "server.address",
    "server.port",
    "http.response.status_code",
    "batchgate.model",
    "batchgate.provider",
)


MAIN_ITEMS = {"ok-0", "ok-1", "retry-0", "bad-0"}


def _records() -> list[dict[str, Any]]:
    records = chat_records(2, prefix="ok")
    retried = chat_records(1, prefix="retry")[0]
    retried["body"]["x_sim"] = {"status": 503, "times": 2}  # two 503s, then an answer
    refused = chat_records(1, prefix="bad")[0]
    refused["body"]["x_sim"] = {"status": 400}  # final: no retry
    no_id = chat_records(1, prefix="x")[0]
    del no_id["custom_id"]  # rejected at create: no trace
    return [*records, retried, refused, no_id]


@pytest.fixture(scope="module")
def traced(
    db_kind: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[RunningStack, OtlpSink, int]]:
    tmp: Path = tmp_path_factory.mktemp(f"otel-{db_kind}")
    simulator_port = free_port()
    metrics_port = free_port_run(2)  # the embedded process on P, executor 0 on P+1
    sink_port = free_port()
    env = {
        "BATCHGATE_CONFIG": write_catalogue(tmp / "catalogue.yaml", simulator_port, api_keys=[UPSTREAM_KEY]),
        "BATCHGATE_SIMULATOR_PORT": str(simulator_port),
        "BATCHGATE_TRACE_SAMPLE_RATIO": "1.0",
        "BATCHGATE_METRICS_PORT": str(metrics_port),
        "BATCHGATE_LOG_FORMAT": "auto",  # the logs are files: JSON
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{sink_port}",
        "OTEL_EXPORTER_OTLP_INSECURE": "true",
        "OTEL_BSP_SCHEDULE_DELAY": "200",
        "OTEL_METRIC_EXPORT_INTERVAL": "500",
    }
    with OtlpSink(sink_port) as sink, fresh_database(db_kind, tmp) as url:
        if db_kind == "sqlite":
            with running_stack(tmp, url, **env) as stack:
                yield stack, sink, metrics_port
        else:
            with replicated_stack(tmp, url, {}, **env) as stack:
                yield stack, sink, metrics_port


@pytest.fixture(scope="module")
def batch(traced: tuple[RunningStack, OtlpSink, int]) -> Any:
    """The main batch (continuing the client's trace), and a one-item batch on Anthropic."""
    stack, _sink, _port = traced
    client = stack.client()
    created = client.batches.create(
        input_file_id=upload(client, _records()).id,
        endpoint="/v1/chat/completions",
        completion_window="24h",
        extra_headers={"traceparent": f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-01"},
    )
    claude = client.batches.create(
        input_file_id=upload(client, chat_records(1, model="claude-haiku-4-5", prefix="claude")).id,
        endpoint="/v1/chat/completions",
        completion_window="24h",
    )
    done = wait_for_batch(client, created.id)
    assert (done.status, done.request_counts.completed, done.request_counts.failed) == ("completed", 3, 2)
    assert wait_for_batch(client, claude.id).request_counts.completed == 1
    return Batches(done.id, claude.id)


@dataclass(frozen=True)
class Batches:
    id: str
    claude_id: str


def _all_traces(sink: OtlpSink, batches: Batches) -> dict[str, list[Span]]:
    """custom_id → its trace's spans, for the items of both batches."""
    return {
        **_item_traces(sink, batches.id, MAIN_ITEMS),
        **_item_traces(sink, batches.claude_id, {"claude-0"}),
    }


def _item_traces(sink: OtlpSink, batch_id: str, custom_ids: set[str]) -> dict[str, list[Span]]:
    """custom_id → every span of its trace, once each item's trace is complete (or a deadline)."""
    deadline = time.monotonic() + 60
    while True:
        spans = sink.spans()
        roots = {
            s.attributes["item.custom_id"]: s.trace_id
            for s in spans
            if s.name == "batchgate.item.accept" and s.attributes.get("batch.id") == batch_id
        }
        traces = {cid: [s for s in spans if s.trace_id == tid] for cid, tid in roots.items()}
        complete = set(roots) == custom_ids and all(
            {s.name for s in trace} >= set(ITEM_SPANS) for trace in traces.values()
        )
        if complete or time.monotonic() > deadline:
            return traces
        time.sleep(0.5)


def _one(spans: list[Span], name: str, parent: Span | None = None) -> Span:
    found = [s for s in spans if s.name == name and (parent is None or s.parent_span_id == parent.span_id)]
    assert len(found) == 1, (name, found)
    return found[0]


def test_each_item_is_one_trace_across_the_four_services(
    traced: tuple[RunningStack, OtlpSink, int], batch: Batches
) -> None:
    _stack, sink, _port = traced
    traces = _all_traces(sink, batch)
    assert set(traces) == {*MAIN_ITEMS, "claude-0"}  # the rejected record has no trace
    create = _one(
        [s for s in sink.spans() if s.trace_id == CLIENT_TRACE], "batchgate.v1.BatchService/CreateBatch"
    )
    for custom_id, spans in traces.items():
        assert {s.service for s in spans} == SERVICES, custom_id
        assert len({s.trace_id for s in spans}) == 1
        accept = _one(spans, "batchgate.item.accept")
        assert (accept.service, accept.parent_span_id) == ("batchgate-ingest", "")
        linked = [(s.trace_id, s.span_id) for s in sink.spans() if s.name == create.name]
        assert len(accept.links) == 1 and accept.links[0] in linked  # linked to its batch's create call
        if custom_id in MAIN_ITEMS:
            assert accept.links == [(create.trace_id, create.span_id)]
        lease = _one(spans, "batchgate.item.lease", parent=accept)
        assert lease.service == "batchgate-scheduler"
        run = _one(spans, "batchgate.item.run", parent=lease)
        assert run.service == "batchgate-executor"
        record = _one(spans, "batchgate.item.record", parent=run)
        assert (record.service, record.attributes["batchgate.record.result"]) == (
            "batchgate-results",
            "accepted",
        )
        # The record span says which file the line went to: no write span for a recorded item.
        assert record.attributes["batchgate.outcome"] == ("failed" if custom_id == "bad-0" else "succeeded")
        assert not [s for s in spans if s.name == "batchgate.item.write"], custom_id
        for span in (accept, lease, run, record):
            assert span.attributes["batch.id"] == (batch.claude_id if custom_id == "claude-0" else batch.id)
            assert span.attributes["item.custom_id"] == custom_id
            assert span.attributes["item.index"] == accept.attributes["item.index"]
        calls = [s for s in spans if s.kind == "client"]
        assert all(s.parent_span_id == run.span_id for s in calls), custom_id
        if custom_id == "retry-0":  # several calls: one span each (the next test)
            assert len(calls) == 3
            continue
        # One call: the run span is that call (GenAI and HTTP client attributes), and the
        # item's trace is its four spans, one per service.
        assert calls == [] and len(spans) == 4, [s.name for s in spans]
        assert set(CALL_ATTRIBUTES) <= set(run.attributes), custom_id
        assert run.attributes["http.request.method"] == "POST"
        assert run.attributes["url.full"].endswith(
            "/v1/chat/completions" if "claude" not in custom_id else "/v1/messages"
        )
        assert run.attributes["http.response.status_code"] == (400 if custom_id == "bad-0" else 200)
        assert run.attributes["gen_ai.operation.name"] == "chat"
        assert run.attributes["batchgate.attempts"] == 1


def test_retries_are_separate_attempt_spans_with_genai_attributes(
    traced: tuple[RunningStack, OtlpSink, int], batch: Batches
) -> None:
    _stack, sink, _port = traced
    traces = _all_traces(sink, batch)
    run = _one(traces["retry-0"], "batchgate.item.run")
    attempts = sorted(
        (s for s in traces["retry-0"] if s.parent_span_id == run.span_id and s.kind == "client"),
        key=lambda s: s.attributes["batchgate.attempt"],
    )
    assert [a.name for a in attempts] == ["chat gpt-4o-mini"] * 3
    assert [a.service for a in attempts] == ["batchgate-executor"] * 3
    assert [a.attributes["batchgate.retry"] for a in attempts] == [0, 1, 2]
    assert [a.attributes["http.response.status_code"] for a in attempts] == [503, 503, 200]
    assert [a.error for a in attempts] == [True, True, False]
    assert attempts[0].attributes["error.type"] == "503"
    for attempt in attempts:  # each call's span is the HTTP call too, and names its item
        assert set(CALL_ATTRIBUTES) <= set(attempt.attributes)
        assert attempt.attributes["url.full"].endswith("/v1/chat/completions")
        assert attempt.attributes["item.custom_id"] == "retry-0"
        assert attempt.attributes["batch.id"] == batch.id
    last = attempts[-1].attributes
    assert last["gen_ai.request.model"] == "gpt-4o-mini" and last["gen_ai.provider.name"] == "openai"
    assert last["batchgate.provider"] == "simulated"
    assert last["gen_ai.usage.input_tokens"] > 0 and last["gen_ai.usage.output_tokens"] > 0
    assert last["gen_ai.response.finish_reasons"] == ["stop"]
    assert run.attributes["batchgate.attempts"] == 3 and not run.error
    assert "http.response.status_code" not in run.attributes  # its calls are its children

    bad_run = _one(traces["bad-0"], "batchgate.item.run")  # a 400 is not retried: one call
    assert bad_run.error and bad_run.attributes["batchgate.outcome"] == "failed"
    assert bad_run.attributes["http.response.status_code"] == 400
    assert bad_run.attributes["error.type"] == "400"

    ok_run = _one(traces["ok-0"], "batchgate.item.run")
    assert ok_run.attributes["gen_ai.usage.input_tokens"] > 0
    assert ok_run.attributes["gen_ai.usage.output_tokens"] > 0
    assert ok_run.attributes["gen_ai.response.finish_reasons"] == ["stop"]
    assert not ok_run.error

    claude = _one(traces["claude-0"], "batchgate.item.run")
    assert claude.attributes["gen_ai.provider.name"] == "anthropic"
    assert claude.attributes["gen_ai.request.model"] == "claude-haiku-4-5"
    assert claude.attributes["gen_ai.usage.output_tokens"] > 0
    assert "gen_ai.input.messages" not in claude.attributes  # content is opt-in


def test_calls_between_services_carry_the_trace_with_rpc_conventions(
    traced: tuple[RunningStack, OtlpSink, int], batch: Batches
) -> None:
    _stack, sink, _port = traced
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        spans = [s for s in sink.spans() if s.trace_id == CLIENT_TRACE]
        if {"batchgate.batch.finalize", "batchgate.internal.v1.SchedulerService/SubmitBatch"} <= {
            s.name for s in spans
        } and any(s.service == "batchgate-envoy" for s in spans):
            break
        time.sleep(0.5)
    create = _one(spans, "batchgate.v1.BatchService/CreateBatch")
    # The client's traceparent came through Envoy, whose own span of the call sits between.
    (envoy,) = [s for s in spans if s.service == "batchgate-envoy"]
    assert (envoy.parent_span_id, envoy.kind) == (CLIENT_SPAN, "server")
    assert create.parent_span_id == envoy.span_id
    assert (create.service, create.kind) == ("batchgate-ingest", "server")
    assert create.attributes == {
        "rpc.system": "grpc",
        "rpc.service": "batchgate.v1.BatchService",
        "rpc.method": "CreateBatch",
        "rpc.grpc.status_code": 0,
    }
    submit = [s for s in spans if s.name == "batchgate.internal.v1.SchedulerService/SubmitBatch"]
    client = next(s for s in submit if s.kind == "client")
    server = next(s for s in submit if s.kind == "server")
    assert (client.service, client.parent_span_id) == ("batchgate-ingest", create.span_id)
    assert (server.service, server.parent_span_id) == ("batchgate-scheduler", client.span_id)
    assert server.attributes["rpc.grpc.status_code"] == 0
    finalize = _one(spans, "batchgate.batch.finalize")  # the batch's end joins its create trace
    assert finalize.service == "batchgate-results"
    assert finalize.attributes["batchgate.batch.status"] == "completed"
    # Background calls (lease polls, result reports) and health probes start no trace.
    roots = {s.name for s in sink.spans() if s.parent_span_id == ""}
    assert not any(name.startswith(("batchgate.internal.", "grpc.health.")) for name in roots), roots


def test_no_secret_in_any_span_or_log_line(
    traced: tuple[RunningStack, OtlpSink, int], batch: Batches
) -> None:
    stack, sink, _port = traced
    _all_traces(sink, batch)
    spans = sink.spans()
    assert len(spans) > 30
    for span in spans:
        text = json.dumps(span.attributes, default=str)
        for secret in (stack.key, UPSTREAM_KEY):
            assert secret not in text, span
        assert not any(k.startswith("http.request.header") for k in span.attributes)
    logs = stack.logs()
    assert stack.key not in logs and UPSTREAM_KEY not in logs


def test_logs_are_json_and_point_at_traces(
    traced: tuple[RunningStack, OtlpSink, int], batch: Batches
) -> None:
    stack, sink, _port = traced
    traces = _all_traces(sink, batch)
    lines = []
    for path in stack.log_dir.glob("*.log"):
        if path.name.startswith("simulator"):  # a stand-in upstream, not part of the stack
            continue
        for raw in path.read_text().splitlines():
            if raw.strip():
                lines.append(json.loads(raw))  # every line of a service and of Envoy is a JSON object
    assert {line["service"] for line in lines} >= {"envoy", "executor"}
    failed = [line for line in lines if line.get("custom_id") == "bad-0"]
    assert failed, "the failed item is logged"
    assert failed[0]["batch_id"] == batch.id and failed[0]["service"] == "executor"
    assert failed[0]["trace_id"] == traces["bad-0"][0].trace_id  # the log line leads to the item's trace
    finalized = [
        line for line in lines if line.get("batch_id") == batch.id and "completed" in line["message"]
    ]
    assert finalized and finalized[0]["trace_id"] == CLIENT_TRACE


def _latest(points: list[Point], **attributes: Any) -> float:
    """A cumulative counter's value for the series with these attributes (0 when absent)."""
    matching = [p for p in points if all(p.attributes.get(k) == v for k, v in attributes.items())]
    return matching[-1].value if matching else 0.0


def test_metrics_carry_the_item_outcomes(
    traced: tuple[RunningStack, OtlpSink, int], batch: Batches, db_kind: str
) -> None:
    _stack, sink, metrics_port = traced
    expected = {
        ("succeeded", ""): 4,
        ("failed", "http_400"): 1,
        ("rejected", "missing_custom_id"): 1,
    }

    def observed() -> dict[str, object]:
        executor = sink.points("gen_ai.client.operation.duration")
        output = {"gen_ai.token.type": "output"}
        chat = "/v1/chat/completions"
        return {
            "finished": {
                key: _latest(sink.points("batchgate.items.finished"), outcome=key[0], error_code=key[1])
                for key in expected
            },
            "finished by": {p.service for p in sink.points("batchgate.items.finished")},
            "503 calls": sum(p.value for p in executor if p.attributes.get("error.type") == "503") >= 2,
            "503 retries": _latest(sink.points("batchgate.upstream.retries"), reason="503"),
            "leased": _latest(sink.points("batchgate.items.leased"), priority="standard"),
            "output tokens": _latest(sink.points("batchgate.upstream.tokens"), **output) > 0,
            "queue depth by": {p.service for p in sink.points("batchgate.queue.depth")},
            "created": _latest(sink.points("batchgate.batches.created"), endpoint=chat) >= 1,
        }

    want = {
        "finished": expected,
        "finished by": {"batchgate-results"},
        "503 calls": True,
        "503 retries": 2,
        "leased": 5,
        "output tokens": True,
        "queue depth by": {"batchgate-scheduler"},
        "created": True,
    }
    # Each service exports on its own schedule: poll until every service's series has arrived.
    deadline = time.monotonic() + 60
    while (got := observed()) != want and time.monotonic() < deadline:
        time.sleep(0.5)
    assert got == want
    if db_kind == "sqlite":  # the embedded process serves its three services' metrics for Prometheus
        scraped = httpx.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).text
        labels = 'error_code="",outcome="succeeded",service_name="batchgate-results"'
        assert f"batchgate_items_finished_total{{{labels}}} 4.0" in scraped
        assert (
            'service_name="batchgate-scheduler"' in scraped and 'service_name="batchgate-ingest"' in scraped
        )
        executor_scrape = httpx.get(f"http://127.0.0.1:{metrics_port + 1}/metrics", timeout=10).text
        assert "gen_ai_client_operation_duration_seconds_count" in executor_scrape
