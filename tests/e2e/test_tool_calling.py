"""Tool calling inside a batch, end to end: the `openai` SDK uploads records that carry
`batchgate.tool_config`, Envoy and every service run them, the simulated upstream asks for
tools over several rounds, and a real HTTP tool server and real MCP servers (`mcp` SDK,
stateful and stateless) answer on loopback. What the user sees: rejections at create, output
and error lines, usage and cost, and each item's trace (a span per model turn and per tool
round), with the tool server's secret nowhere in files, spans or logs."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.otlp_sink import OtlpSink, Span
from tests.support import (
    free_port,
    fresh_database,
    read_jsonl,
    running_stack,
    upload,
    wait_for_batch,
)
from tests.tool_servers import tool_servers

SECRET = "Bearer tool-secret-e2e-91c2"
TURN_USAGE = {"prompt_tokens": 10, "completion_tokens": 3}
TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]


def record(custom_id: str, config: dict[str, Any] | None, rounds: int = 3, **body: Any) -> dict[str, Any]:
    request: dict[str, Any] = {
        "model": "gpt-4o-mini",
        "messages": [{"role": "user", "content": f"question {custom_id}"}],
        "tools": TOOLS,
        "x_sim": {"tool_rounds": rounds, "usage": TURN_USAGE},
        **body,
    }
    if config is not None:
        request["batchgate"] = {"tool_config": config}
    return {"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions", "body": request}


@pytest.fixture(scope="module")
def world(db_kind: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A traced stack (tool URLs on loopback allowed through the webhook list it inherits),
    the tool servers, and one finished batch of every case."""
    tmp: Path = tmp_path_factory.mktemp(f"tools-{db_kind}")
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
        tool_servers() as servers,
        fresh_database(db_kind, tmp) as url,
        running_stack(tmp, url, **env) as stack,
    ):
        http, stateful, stateless = servers["http"], servers["stateful"], servers["stateless"]
        records = [
            record("http-3", {"url": http.url, "authorization": SECRET, "context": {"user": 7}}),
            record("mcp-stateful", {"type": "mcp", "url": stateful.url, "authorization": SECRET}, rounds=2),
            record("mcp-stateless", {"type": "mcp", "url": stateless.url}, rounds=1),
            record("exhausted", {"url": http.url, "max_rounds": 2}, rounds=5),
            record("fails", {"url": http.url, "authorization": SECRET, "context": {"mode": "fail_at:2"}}),
            record("no-config", None, rounds=0),
            record("bad-rounds", {"url": http.url, "max_rounds": -1}),
            record("bad-url", {"url": "gopher://tools.example/"}),
            record("private", {"url": "http://169.254.169.254/latest"}),
        ]
        client = stack.client()
        created = client.batches.create(
            input_file_id=upload(client, records).id, endpoint="/v1/chat/completions", completion_window="24h"
        )
        done = wait_for_batch(client, created.id, timeout_s=180)
        yield {"stack": stack, "sink": sink, "servers": servers, "created": created, "done": done}


def _lines(world: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    client, done = world["stack"].client(), world["done"]
    output = read_jsonl(client.files.content(done.output_file_id).content)
    errors = read_jsonl(client.files.content(done.error_file_id).content)
    return {line["custom_id"]: line for line in output}, {line["custom_id"]: line for line in errors}


def test_bad_tool_configs_are_rejected_at_create_with_line_and_custom_id(world: dict[str, Any]) -> None:
    created = world["created"]
    assert created.rejected_count == 3
    rejected = {r["custom_id"]: r for r in created.rejected_records}
    assert {c: (r["line"], r["code"]) for c, r in rejected.items()} == {
        "bad-rounds": (7, "invalid_tool_config"),
        "bad-url": (8, "invalid_tool_config"),
        "private": (9, "invalid_tool_config"),
    }
    assert "must not be negative" in rejected["bad-rounds"]["message"]
    assert "http:// or https://" in rejected["bad-url"]["message"]
    assert "169.254.169.254" in rejected["private"]["message"]


def test_tool_records_run_to_a_final_answer_with_summed_usage(world: dict[str, Any]) -> None:
    done = world["done"]
    assert (done.status, done.request_counts.completed, done.request_counts.failed) == ("completed", 5, 4)
    output, _errors = _lines(world)
    expected = {"http-3": (3, "stop", 4), "mcp-stateful": (2, "stop", 3), "mcp-stateless": (1, "stop", 2)}
    for custom_id, (rounds, reason, turns) in expected.items():
        body = output[custom_id]["response"]["body"]
        assert body["batchgate"] == {"tool_rounds": rounds}, custom_id
        assert body["choices"][0]["finish_reason"] == reason
        assert (body["usage"]["prompt_tokens"], body["usage"]["completion_tokens"]) == (10 * turns, 3 * turns)
    exhausted = output["exhausted"]["response"]["body"]
    assert exhausted["choices"][0]["finish_reason"] == "tool_calls"
    assert exhausted["batchgate"] == {"tool_rounds": 2} and exhausted["usage"]["prompt_tokens"] == 30
    plain = output["no-config"]["response"]["body"]  # tools, no tool_config: as before
    assert "batchgate" not in plain and plain["usage"]["prompt_tokens"] == 10
    # The batch bills what the output lines say, and the two turns the provider answered for the
    # record that failed at its second tool round (it was not billed for them before).
    billed = sum(line["response"]["body"]["usage"]["prompt_tokens"] for line in output.values())
    assert billed == 40 + 30 + 20 + 30 + 10
    assert (done.usage.input_tokens, done.usage.output_tokens) == (billed + 2 * 10, 3 * (billed // 10 + 2))


def test_a_failing_tool_round_is_an_error_line_saying_which_round(world: dict[str, Any]) -> None:
    _output, errors = _lines(world)
    line = errors["fails"]
    assert line["response"] is None
    assert line["error"] == {
        "code": "tool_execution_failed",
        "message": "Tool round 2 failed: the tool server answered HTTP 500.",
    }


def test_the_tool_servers_got_context_authorization_and_idempotency_keys(world: dict[str, Any]) -> None:
    http = world["servers"]["http"]
    posts = [r for r in http.requests() if r.body["custom_id"] == "http-3"]
    assert len(posts) == 3
    assert all(p.headers["authorization"] == SECRET and p.body["context"] == {"user": 7} for p in posts)
    assert len({p.headers["idempotency-key"] for p in posts}) == 3
    stateful = world["servers"]["stateful"].requests()
    assert [r.body["method"] for r in stateful if isinstance(r.body, dict)][:2] == [
        "initialize",
        "notifications/initialized",
    ]
    assert all(r.headers["authorization"] == SECRET for r in stateful)


def test_no_tool_config_or_secret_in_files(world: dict[str, Any]) -> None:
    client, done = world["stack"].client(), world["done"]
    for file_id in (done.output_file_id, done.error_file_id):
        text = client.files.content(file_id).text
        assert '"tool_config"' not in text and SECRET not in text  # no line carries the object


def _trace_of(world: dict[str, Any], custom_id: str) -> list[Span]:
    sink: OtlpSink = world["sink"]
    return sink.item_trace(custom_id)


def test_each_model_turn_and_tool_round_is_its_own_span(world: dict[str, Any]) -> None:
    trace = _trace_of(world, "http-3")
    (run,) = [s for s in trace if s.name == "batchgate.item.run"]
    turns = sorted(
        (s for s in trace if s.name == "batchgate.tool.turn"),
        key=lambda s: s.attributes["batchgate.tool.turn"],
    )
    rounds = sorted(
        (s for s in trace if s.name == "batchgate.tool.round"),
        key=lambda s: s.attributes["batchgate.tool.round"],
    )
    assert [s.attributes["batchgate.tool.turn"] for s in turns] == [1, 2, 3, 4]
    assert [s.attributes["batchgate.tool.round"] for s in rounds] == [1, 2, 3]
    assert all(s.parent_span_id == run.span_id for s in [*turns, *rounds])
    for turn in turns:  # each turn holds its model call
        assert [s.kind for s in trace if s.parent_span_id == turn.span_id] == ["client"]
    for tool_round in rounds:  # each round holds its POST to the tool server
        (post,) = [s for s in trace if s.parent_span_id == tool_round.span_id]
        assert post.name == "POST" and post.attributes["url.full"] == world["servers"]["http"].url
    failed = [s for s in _trace_of(world, "fails") if s.name == "batchgate.tool.round"]
    assert [s.error for s in sorted(failed, key=lambda s: s.attributes["batchgate.tool.round"])] == [
        False,
        True,
    ]
    mcp = _trace_of(world, "mcp-stateful")
    assert len([s for s in mcp if s.name == "execute_tool lookup"]) == 2


def test_the_tool_secret_is_in_no_span_and_no_log_line(world: dict[str, Any]) -> None:
    for custom_id in ("http-3", "mcp-stateful", "fails"):
        _trace_of(world, custom_id)
    spans = world["sink"].spans()
    assert any(s.name == "batchgate.tool.round" for s in spans)
    for span in spans:
        assert SECRET not in json.dumps(span.attributes, default=str), span
    assert SECRET.split()[-1] not in world["stack"].logs()


def test_a_tool_url_whose_host_no_resolver_takes_rejects_its_record_alone(world: dict[str, Any]) -> None:
    """A DNS label over 63 characters or an empty one made `getaddrinfo` raise UnicodeError,
    which failed the whole create with a 500."""
    http = world["servers"]["http"]
    records = [
        record("long-label", {"url": "http://" + "a" * 64 + ".example/tools"}),
        record("empty-label", {"url": "http://a..b.example/tools"}),
        record("reachable", {"url": http.url}, rounds=1),
    ]
    client = world["stack"].client()
    created = client.batches.create(
        input_file_id=upload(client, records).id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    rejected = {r["custom_id"]: r for r in created.rejected_records}
    assert {c: (r["line"], r["code"]) for c, r in rejected.items()} == {
        "long-label": (1, "invalid_tool_config"),
        "empty-label": (2, "invalid_tool_config"),
    }
    assert all("is not a valid host name" in r["message"] for r in rejected.values())
    assert wait_for_batch(client, created.id, timeout_s=120).request_counts.completed == 1
