"""Workflows end to end: the `openai` SDK uploads records that carry `batchgate.workflow`,
Envoy and every service run them over the simulated upstream, and a real callback server on
loopback drives them (`tests.workflow_servers`): a three-step map-reduce whose reduce quotes the
map answers, every bound, every kind of callback failure, and the rejections at create. What
the user sees: output and error lines, the batch's usage (every successful request billed),
and each item's trace (a span per step and per request), with the callback's secret nowhere."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from tests.e2e.test_keys_and_budgets import cli
from tests.otlp_sink import OtlpSink, Span
from tests.support import free_port, fresh_database, read_jsonl, running_stack, upload, wait_for_batch
from tests.workflow_servers import WorkflowCallbackServer

SECRET = "Bearer workflow-secret-e2e-5d1a"
USAGE = {"prompt_tokens": 10, "completion_tokens": 3}


def record(
    custom_id: str, workflow: dict[str, Any] | None, *, max_tokens: int | None = None, **context: Any
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "gpt-4o-mini",
        "messages": [{"role": "user", "content": f"document {custom_id}"}],
        "x_sim": {"usage": USAGE},
    }
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    if workflow is not None:
        body["batchgate"] = {"workflow": {**workflow, "context": {"x_sim": {"usage": USAGE}, **context}}}
    return {"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions", "body": body}


@pytest.fixture(scope="module")
def world(db_kind: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A traced stack (callbacks on loopback allowed through the webhook list the tool list
    inherits), the callback server, and one finished batch of every case."""
    tmp: Path = tmp_path_factory.mktemp(f"workflows-{db_kind}")
    sink_port = free_port()
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{sink_port}",
        "OTEL_EXPORTER_OTLP_INSECURE": "true",
        "OTEL_BSP_SCHEDULE_DELAY": "200",
        "BATCHGATE_TRACE_SAMPLE_RATIO": "1.0",
        "BATCHGATE_LOG_FORMAT": "json",
    }
    with (
        OtlpSink(sink_port) as sink,
        WorkflowCallbackServer(slow_s=2.0) as callback,
        fresh_database(db_kind, tmp) as url,
        running_stack(tmp, url, projects=("default", "other"), **env) as stack,
    ):
        cli(stack, "projects", "set-policy", "default", "--features", "workflows")  # before any call
        base = {"url": callback.url}
        records = [
            record("map-reduce", {**base, "authorization": SECRET}),
            record("flaky", base, mode="flaky"),
            record("steps", {**base, "max_steps": 3}, mode="forever"),
            record("requests", {**base, "max_requests": 6}, mode="forever", per_step=4),
            record("tokens", {**base, "max_tokens": 25}, max_tokens=1),  # room for step 0 alone
            record("cb-500", {**base, "authorization": SECRET}, mode="status:500"),
            record("cb-slow", {**base, "timeout_ms": 300}, mode="slow"),
            record("cb-malformed", base, mode="malformed"),
            record("cb-not-json", base, mode="not_json"),
            record("cb-failed", base, mode="failed"),
            record("plain", None),
            record("bad-steps", {**base, "max_steps": -1}),
            record("bad-url", {"url": "gopher://callback.example/"}),
            record("private", {"url": "http://169.254.169.254/latest"}),
            record("unknown-field", {**base, "retries": 3}),
        ]
        both = record("both", base)
        both["body"]["batchgate"]["tool_config"] = {"url": callback.url}
        both["body"]["tools"] = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
        records.append(both)
        client = stack.client()
        created = client.batches.create(
            input_file_id=upload(client, records).id, endpoint="/v1/chat/completions", completion_window="24h"
        )
        done = wait_for_batch(client, created.id, timeout_s=240)
        yield {"stack": stack, "sink": sink, "callback": callback, "created": created, "done": done}


def _lines(world: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    client, done = world["stack"].client(), world["done"]
    output = read_jsonl(client.files.content(done.output_file_id).content)
    errors = read_jsonl(client.files.content(done.error_file_id).content)
    return {line["custom_id"]: line for line in output}, {line["custom_id"]: line for line in errors}


def test_bad_workflows_are_rejected_at_create_with_line_and_custom_id(world: dict[str, Any]) -> None:
    rejected = {r["custom_id"]: r for r in world["created"].rejected_records}
    assert {c: (r["line"], r["code"]) for c, r in rejected.items()} == {
        "bad-steps": (12, "invalid_workflow"),
        "bad-url": (13, "invalid_workflow"),
        "private": (14, "invalid_workflow"),
        "unknown-field": (15, "invalid_workflow"),
        "both": (16, "invalid_workflow"),
    }
    assert "'workflow.max_steps' must not be negative" in rejected["bad-steps"]["message"]
    assert "http:// or https://" in rejected["bad-url"]["message"]
    assert "'workflow.url' may not be called" in rejected["private"]["message"]
    assert "retries" in rejected["unknown-field"]["message"]
    assert "both" in rejected["both"]["message"]


def test_a_three_step_map_reduce_completes_with_its_output_and_summed_usage(world: dict[str, Any]) -> None:
    done = world["done"]
    counts = done.request_counts
    assert (done.status, counts.completed, counts.failed) == ("completed", 3, 8 + 5)  # 5 rejected at create
    output, _errors = _lines(world)
    for custom_id in ("map-reduce", "flaky"):
        line = output[custom_id]
        assert line["error"] is None and line["response"]["status_code"] == 200
        assert re.fullmatch(r"req_[0-9a-f]{32}", line["response"]["request_id"])  # it was ""
        body = line["response"]["body"]
        assert body["object"] == "batchgate.workflow.result"
        assert (body["steps"], body["requests"]) == (3, 5)  # 1 + 3 maps + 1 reduce
        assert body["output"]["maps"] == 3 and body["output"]["summary"]
        assert (body["usage"]["prompt_tokens"], body["usage"]["completion_tokens"]) == (50, 15)
        assert body["usage"]["total_tokens"] == 65
    assert "batchgate" not in output["plain"]["response"]["body"]


def test_each_step_posts_the_results_the_callback_depends_on(world: dict[str, Any]) -> None:
    posts = [r for r in world["callback"].requests() if r.body["custom_id"] == "map-reduce"]
    assert [p.body["step"] for p in posts] == [0, 1, 2]
    assert all(p.headers["authorization"] == SECRET for p in posts)
    assert all(p.body["context"]["x_sim"] == {"usage": USAGE} for p in posts)
    assert len({p.headers["idempotency-key"] for p in posts}) == 3
    first, maps, reduce = (p.body["results"] for p in posts)
    assert [r["id"] for r in first] == ["map-reduce"] and first[0]["status_code"] == 200
    assert sorted(r["id"] for r in maps) == ["map-0", "map-1", "map-2"]
    assert all(r["body"]["object"] == "chat.completion" for r in maps)
    assert [r["id"] for r in reduce] == ["reduce"]
    # A retried step is sent again under the same key.
    flaky = [r for r in world["callback"].requests() if r.body["custom_id"] == "flaky"]
    assert [p.body["step"] for p in flaky] == [0, 0, 1, 1, 2, 2]
    assert len({p.headers["idempotency-key"] for p in flaky}) == 3


def test_every_bound_fails_the_record_with_the_step_it_was_at(world: dict[str, Any]) -> None:
    _output, errors = _lines(world)
    expected = {
        "steps": "Workflow step 2: the callback asked for step 3; max_steps is 3.",
        "requests": "Workflow step 2: 4 more request(s) would make 9; max_requests is 6.",
        # Its three maps (no max_tokens: the model's 4096 each) could pass 25: none is sent.
        "tokens": "Workflow step 1: its requests could bring it to ",
    }
    for custom_id, message in expected.items():
        assert errors[custom_id]["response"] is None
        error = errors[custom_id]["error"]
        assert error["code"] == "workflow_limit_exceeded" and error["message"].startswith(message), error
    assert errors["tokens"]["error"]["message"].endswith(" tokens; max_tokens is 25.")


def test_callback_failures_after_retries_fail_the_record(world: dict[str, Any]) -> None:
    _output, errors = _lines(world)
    expected = {
        "cb-500": "the callback answered HTTP 500",
        "cb-slow": "did not answer within 0.3 s",
        "cb-malformed": "the answer's 'status' is not one of continue, completed, failed",
        "cb-not-json": "the callback's answer is not JSON",
    }
    for custom_id, why in expected.items():
        error = errors[custom_id]["error"]
        assert error["code"] == "workflow_callback_failed", custom_id
        assert error["message"].startswith("Workflow step 0: ") and why in error["message"], error
        assert "(after 3 attempts)" in error["message"]
    posts = [r for r in world["callback"].requests() if r.body["custom_id"] == "cb-500"]
    assert len(posts) == 3 and len({p.headers["idempotency-key"] for p in posts}) == 1
    failed = errors["cb-failed"]["error"]
    assert failed["code"] == "workflow_failed"
    assert failed["message"] == 'Workflow step 0: the callback answered \'failed\': {"reason":"not today"}'


def test_every_successful_request_is_billed(world: dict[str, Any]) -> None:
    # map-reduce 5, flaky 5, steps 3, requests 1 + 4, tokens 1, five callback failures 1 each,
    # plain 1: billed whether the record completed or not.
    requests = 5 + 5 + 3 + 5 + 1 + 5 + 1
    done = world["done"]
    assert (done.usage.input_tokens, done.usage.output_tokens) == (10 * requests, 3 * requests)


def test_no_workflow_object_or_secret_in_files(world: dict[str, Any]) -> None:
    client, done = world["stack"].client(), world["done"]
    for file_id in (done.output_file_id, done.error_file_id):
        text = client.files.content(file_id).text
        assert SECRET not in text and '"authorization"' not in text


def _trace_of(world: dict[str, Any], custom_id: str) -> list[Span]:
    sink: OtlpSink = world["sink"]
    return sink.item_trace(custom_id)


def test_each_step_and_each_request_is_a_span(world: dict[str, Any]) -> None:
    trace = _trace_of(world, "map-reduce")
    (run,) = [s for s in trace if s.name == "batchgate.item.run"]
    steps = sorted(
        (s for s in trace if s.name == "batchgate.workflow.step"),
        key=lambda s: s.attributes["batchgate.workflow.step"],
    )
    assert [s.attributes["batchgate.workflow.step"] for s in steps] == [0, 1, 2]
    assert [s.attributes["batchgate.workflow.requests"] for s in steps] == [1, 3, 1]
    assert all(s.parent_span_id == run.span_id for s in steps)
    for step in steps:
        children = [s for s in trace if s.parent_span_id == step.span_id]
        requests = [s for s in children if s.name == "batchgate.workflow.request"]
        (post,) = [s for s in children if s.name == "POST"]
        assert post.attributes["url.full"] == world["callback"].url
        assert len(requests) == step.attributes["batchgate.workflow.requests"]
        for request in requests:  # each request holds its model call
            assert [s.kind for s in trace if s.parent_span_id == request.span_id] == ["client"]
    spans = world["sink"].spans()
    for span in spans:
        assert SECRET not in json.dumps(span.attributes, default=str), span
    assert SECRET.split()[-1] not in world["stack"].logs()


@pytest.mark.parametrize(
    ("bounds", "model"),
    [({}, "gpt-4o-mini"), ({"max_steps": -1}, "gpt-4o-mini"), ({}, "no-such-model")],
    ids=["valid", "invalid", "unknown-model"],
)
def test_a_project_without_the_workflows_feature_gets_409_and_no_batch(
    world: dict[str, Any], bounds: dict[str, Any], model: str
) -> None:
    """An invalid workflow record, or one naming an unknown model, was rejected alone (200):
    fixed, it met the 409 only then."""
    client = world["stack"].client("other")
    workflow_record = record("wf", {"url": world["callback"].url, **bounds})
    workflow_record["body"]["model"] = model
    records = [record("plain", None), workflow_record]
    with pytest.raises(openai.ConflictError) as caught:
        client.batches.create(
            input_file_id=upload(client, records).id, endpoint="/v1/chat/completions", completion_window="24h"
        )
    assert caught.value.status_code == 409
    assert caught.value.body["code"] == "feature_disabled"  # type: ignore[index]
    assert client.batches.list().data == []
