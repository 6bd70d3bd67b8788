"""The tool loop of the item runner over real HTTP: the simulated upstream asks for tools over
several rounds, a real HTTP tool server and real MCP servers (built with the `mcp` SDK,
stateful and stateless) answer on loopback."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from aiohttp import web

from batchgate.internal.v1 import items_pb2, recorder_pb2, scheduler_pb2
from batchgate.services.common.catalogue import ModelConfig, ProviderConfig, RetryPolicy
from batchgate.services.common.config import Settings
from batchgate.services.common.loading import load_settings
from batchgate.services.executor.runner import Control, ItemRunner
from tests.tool_servers import tool_servers

RETRY = RetryPolicy(initial_interval_s=0.05, backoff_coefficient=2.0, max_interval_s=0.2, max_attempts=2)
TURN_USAGE = {"prompt_tokens": 10, "completion_tokens": 3}
SECRET = "Bearer tool-secret-7f3a"
_numbers = itertools.count()


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, Any]]:
    with tool_servers() as running:
        yield running


def settings_for(base: str, **env: str) -> Settings:
    settings = load_settings(environ={"BATCHGATE_TOOL_ALLOWED_NETWORKS": "127.0.0.0/8", **env})
    provider = ProviderConfig(name="oai", kind="openai", base_url=f"{base}/v1", api_keys=("k",))
    return dataclasses.replace(
        settings,
        providers=(provider,),
        models=(ModelConfig(name="gpt-4o-mini", provider="oai"),),
        retry=RETRY,
    )


def tool(name: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}


def leased(
    text: str, config: dict[str, Any] | None, rounds: int = 3, tool_name: str = "lookup", **sim: Any
) -> Any:
    body: dict[str, Any] = {
        "model": "gpt-4o-mini",
        "messages": [{"role": "user", "content": text}],
        "tools": [tool(tool_name)],
        "x_sim": {"tool_rounds": rounds, "usage": TURN_USAGE, **sim},
    }
    if config is not None:
        body["batchgate"] = {"tool_config": {"max_rounds": 8, "timeout_ms": 5000, **config}}
    return scheduler_pb2.LeasedItem(
        ref=items_pb2.ItemRef(batch_id="batch_tools", index=next(_numbers), attempt=1),
        custom_id=f"rec-{text}",
        endpoint="/v1/chat/completions",
        model="gpt-4o-mini",
        body=orjson.dumps(body),
    )


async def run(settings: Settings, item: scheduler_pb2.LeasedItem, control: Control | None = None) -> Any:
    runner = ItemRunner(settings)
    try:
        return await runner.run(item, control)
    finally:
        await runner.close()


def answer(outcome: recorder_pb2.Outcome) -> dict[str, Any]:
    assert outcome.state == recorder_pb2.OUTCOME_STATE_SUCCEEDED, outcome
    parsed: dict[str, Any] = orjson.loads(outcome.response_body)
    return parsed


def for_record(requests: list[Any], custom_id: str) -> list[Any]:
    return [r for r in requests if isinstance(r.body, dict) and r.body.get("custom_id") == custom_id]


async def test_http_tools_run_three_rounds_and_usage_sums_every_turn(
    simulator: str, servers: dict[str, Any]
) -> None:
    http = servers["http"]
    item = leased(
        "three rounds", {"url": http.url, "authorization": SECRET, "context": {"user": 7}}, echo=True
    )
    outcome = await run(settings_for(simulator), item)
    body = answer(outcome)
    assert body["batchgate"] == {"tool_rounds": 3}
    assert body["choices"][0]["finish_reason"] == "stop"
    assert body["usage"]["prompt_tokens"] == 40 and body["usage"]["completion_tokens"] == 12  # 4 turns
    assert body["usage"]["total_tokens"] == 52
    assert (outcome.usage.prompt_tokens, outcome.usage.completion_tokens, outcome.attempts) == (40, 12, 4)
    # The last turn saw the whole conversation, and no tool_config.
    seen = orjson.loads(body["choices"][0]["message"]["content"])
    assert "batchgate" not in seen and "tool_config" not in orjson.dumps(seen).decode()
    roles = [m["role"] for m in seen["messages"]]
    assert roles == ["user", "assistant", "tool", "assistant", "tool", "assistant", "tool"]
    assert seen["messages"][2]["content"] == 'lookup{"round":1,"call":0} -> ok'
    posts = for_record(http.requests(), "rec-three rounds")
    assert len(posts) == 3
    assert {p.headers["authorization"] for p in posts} == {SECRET}
    assert all(p.body["context"] == {"user": 7} for p in posts)
    assert [p.body["tool_calls"][0]["function"]["name"] for p in posts] == ["lookup"] * 3
    keys = [p.headers["idempotency-key"] for p in posts]
    assert len(set(keys)) == 3

    again = await run(settings_for(simulator), item)  # a re-run (retry, crash) sends the same keys
    assert answer(again)["batchgate"] == {"tool_rounds": 3}
    assert [p.headers["idempotency-key"] for p in for_record(http.requests(), "rec-three rounds")[3:]] == keys


async def test_exhausting_max_rounds_keeps_the_last_answer_asking_for_tools(
    simulator: str, servers: dict[str, Any]
) -> None:
    outcome = await run(
        settings_for(simulator), leased("exhaust", {"url": servers["http"].url, "max_rounds": 2}, rounds=5)
    )
    body = answer(outcome)
    assert body["choices"][0]["finish_reason"] == "tool_calls"
    assert body["batchgate"] == {"tool_rounds": 2}
    assert body["usage"]["prompt_tokens"] == 30  # 3 turns
    assert len(for_record(servers["http"].requests(), "rec-exhaust")) == 2


@pytest.mark.parametrize(
    "mode, config, reason",
    [
        ("status:500", {}, "Tool round 1 failed: the tool server answered HTTP 500."),
        ("fail_at:2", {}, "Tool round 2 failed: the tool server answered HTTP 500."),
        (
            "slow",
            {"timeout_ms": 300},
            "Tool round 1 failed: http://127.0.0.1:{port}/tools did not answer within 0.3 s.",
        ),
        ("malformed", {}, "Tool round 1 failed: the tool server's answer has no 'results' list."),
        ("missing", {}, "Tool round 1 failed: the tool server's answer has no result for tool call"),
    ],
)
async def test_a_failing_http_tool_server_fails_the_record_billed_for_its_turns(
    simulator: str, servers: dict[str, Any], mode: str, config: dict[str, Any], reason: str
) -> None:
    http = servers["http"]
    item = leased(
        f"fails {mode}", {"url": http.url, "authorization": SECRET, "context": {"mode": mode}, **config}
    )
    outcome = await run(settings_for(simulator), item)
    assert outcome.state == recorder_pb2.OUTCOME_STATE_FAILED
    assert outcome.error_code == "tool_execution_failed"
    assert outcome.error_message.startswith(reason.format(port=http.port))
    assert SECRET not in outcome.error_message
    assert not outcome.status_code  # the error line holds no answer; the turns the provider billed are billed
    turns = int(reason.split()[2])  # "Tool round N failed": N model turns ran before it
    assert (outcome.usage.prompt_tokens, outcome.usage.completion_tokens) == (10 * turns, 3 * turns)
    assert outcome.model == "gpt-4o-mini"


async def test_records_without_tool_config_run_as_before_even_with_tools(simulator: str) -> None:
    item = leased("plain", None, rounds=0)
    body = answer(await run(settings_for(simulator), item))
    assert "batchgate" not in body and body["choices"][0]["finish_reason"] == "stop"
    asking = leased("plain asking", None, rounds=2)  # the model asks; nobody runs the tools
    assert answer(await run(settings_for(simulator), asking))["choices"][0]["finish_reason"] == "tool_calls"


async def test_a_tool_server_at_a_refused_address_fails_at_run_time(
    simulator: str, servers: dict[str, Any]
) -> None:
    settings = settings_for(simulator, BATCHGATE_TOOL_ALLOWED_NETWORKS="none")
    outcome = await run(settings, leased("refused address", {"url": servers["http"].url}))
    assert outcome.error_code == "tool_execution_failed"
    assert "127.0.0.1 is not allowed" in outcome.error_message
    named = await run(
        settings, leased("refused name", {"url": servers["http"].url.replace("127.0.0.1", "localhost")})
    )
    assert named.error_code == "tool_execution_failed" and "could not reach" in named.error_message


async def test_a_cancel_during_a_tool_round_ends_the_record_with_its_last_answer(
    simulator: str, servers: dict[str, Any]
) -> None:
    http = servers["http"]
    control = Control()
    item = leased("cancelled", {"url": http.url, "context": {"mode": "slow"}, "timeout_ms": 10_000})
    running = asyncio.create_task(run(settings_for(simulator), item, control))
    for _ in range(500):  # until the tool round is under way (10 s at most)
        if for_record(http.requests(), "rec-cancelled"):
            break
        await asyncio.sleep(0.02)
    control.halt()
    body = answer(await running)
    assert body["choices"][0]["finish_reason"] == "tool_calls" and body["batchgate"] == {"tool_rounds": 1}
    assert len(for_record(http.requests(), "rec-cancelled")) == 1


async def test_a_cancel_while_a_turn_waits_to_retry_ends_the_record_with_its_last_answer(
    simulator: str, servers: dict[str, Any]
) -> None:
    """Each turn's first call answers 503 with Retry-After 3 s; the cancel comes while the
    second turn waits. Its last answer, as a cancel between rounds gives: it had ended failed,
    the 503 its error line and the turn before it lost."""
    http = servers["http"]
    control = Control()
    item = leased("retrying", {"url": http.url}, rounds=2, status=503, times=1, retry_after=3)
    running = asyncio.create_task(run(settings_for(simulator), item, control))
    for _ in range(500):  # until the tool round is under way (10 s at most)
        if for_record(http.requests(), "rec-retrying"):
            break
        await asyncio.sleep(0.02)
    await asyncio.sleep(1)  # the second turn's first call answered 503: it waits to retry
    control.halt()
    outcome = await running
    body = answer(outcome)
    assert body["choices"][0]["finish_reason"] == "tool_calls" and body["batchgate"] == {"tool_rounds": 1}
    assert outcome.attempts == 3  # the first turn's two calls, the second turn's one


async def test_a_turn_is_not_started_past_max_tokens_by_what_the_provider_counted(
    simulator: str, servers: dict[str, Any]
) -> None:
    """The first turn's prompt holds what the estimate reads as a few tokens and the provider
    bills as 3,300 (images, say): the second turn, estimated from the provider's count, would
    pass max_tokens and is not started. It had run, taking the record to 6,650 tokens."""
    usage = {"prompt_tokens": 3300, "completion_tokens": 25}
    item = leased("counted", {"url": servers["http"].url, "max_tokens": 4000}, rounds=2, usage=usage)
    item.body = orjson.dumps({**orjson.loads(item.body), "max_tokens": 100})  # each turn's output
    outcome = await run(settings_for(simulator), item)
    assert (outcome.state, outcome.error_code) == (recorder_pb2.OUTCOME_STATE_FAILED, "tool_limit_exceeded")
    assert outcome.error_message.startswith("Model turn 2 could bring the record to")
    assert (outcome.usage.prompt_tokens, outcome.usage.completion_tokens, outcome.attempts) == (3300, 25, 1)


async def test_mcp_stateful_session_over_sse(simulator: str, servers: dict[str, Any]) -> None:
    mcp = servers["stateful"]
    config = {"type": "mcp", "url": mcp.url, "context": {"tenant": "t1"}}
    body = answer(await run(settings_for(simulator), leased("mcp stateful", config, rounds=2, tool_calls=2)))
    assert body["batchgate"] == {"tool_rounds": 2}
    seen = mcp.requests()
    methods = [r.body.get("method") if isinstance(r.body, dict) else r.method for r in seen]
    assert methods == ["initialize", "notifications/initialized", *["tools/call"] * 4, "DELETE"]
    initialize = seen[0].body["params"]
    assert initialize["clientInfo"]["name"] == "batchgate" and initialize["protocolVersion"] >= "2025-03-26"
    session = seen[2].headers["mcp-session-id"]
    assert session and all(r.headers.get("mcp-session-id") == session for r in seen[1:])
    calls = [r for r in seen if isinstance(r.body, dict) and r.body.get("method") == "tools/call"]
    assert all(r.headers["mcp-protocol-version"] == "2025-06-18" for r in calls)
    first_round = sorted((c.body["params"]["arguments"] for c in calls[:2]), key=lambda a: a["call"])
    assert first_round == [
        {"round": 1, "call": 0, "_context": {"tenant": "t1"}},
        {"round": 1, "call": 1, "_context": {"tenant": "t1"}},
    ]
    assert {c.body["params"]["name"] for c in calls} == {"lookup"}
    assert len({c.headers["idempotency-key"] for c in calls}) == 4


async def test_mcp_stateless_server_with_json_answers(simulator: str, servers: dict[str, Any]) -> None:
    mcp = servers["stateless"]
    body = answer(
        await run(
            settings_for(simulator),
            leased("mcp stateless", {"type": "mcp", "url": mcp.url}, rounds=1, echo=True),
        )
    )
    assert body["batchgate"] == {"tool_rounds": 1}
    seen = orjson.loads(body["choices"][0]["message"]["content"])
    assert seen["messages"][-1]["content"] == 'lookup {"call":0,"round":1}'
    assert not any("mcp-session-id" in r.headers for r in mcp.requests())


async def test_mcp_server_without_the_handshake_gets_tools_call_directly(
    simulator: str, servers: dict[str, Any]
) -> None:
    bare = servers["bare"]
    body = answer(
        await run(settings_for(simulator), leased("mcp bare", {"type": "mcp", "url": bare.url}, rounds=1))
    )
    assert body["batchgate"] == {"tool_rounds": 1}
    assert [r.body["method"] for r in bare.requests()] == ["initialize", "tools/call"]


async def test_an_mcp_event_stream_kept_open_after_its_answer_is_read_up_to_the_answer(
    simulator: str,
) -> None:
    """The server answers tools/call at once, then keeps the stream open with keep-alive
    comments (the spec's SHOULD close is not a MUST): the round failed "did not answer"."""

    async def handle(request: web.Request) -> web.StreamResponse:
        message = await request.json()
        if message["method"] == "initialize":
            return web.Response(status=404)  # stateless: tools/call directly
        stream = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await stream.prepare(request)
        result = {"content": [{"type": "text", "text": "kept open"}]}
        answer = {"jsonrpc": "2.0", "id": message["id"], "result": result}
        await stream.write(b"data: " + orjson.dumps(answer) + b"\n\n")
        for _ in range(100):  # 10 s of keep-alives, past the record's 2 s timeout
            await asyncio.sleep(0.1)
            await stream.write(b": keep-alive\n\n")
        return stream

    app = web.Application()
    app.router.add_post("/mcp", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        config = {"type": "mcp", "url": f"http://127.0.0.1:{port}/mcp", "timeout_ms": 2000}
        body = answer(await run(settings_for(simulator), leased("kept open", config, rounds=1, echo=True)))
    finally:
        await runner.cleanup()
    assert body["batchgate"] == {"tool_rounds": 1}
    seen = orjson.loads(body["choices"][0]["message"]["content"])
    assert seen["messages"][-1]["content"] == "kept open"


async def test_mcp_authorization_is_sent_and_401_on_initialize_fails_the_record(
    simulator: str, servers: dict[str, Any]
) -> None:
    guarded = servers["guarded"]
    ok = await run(
        settings_for(simulator),
        leased(
            "mcp token", {"type": "mcp", "url": guarded.url, "authorization": "Bearer mcp-secret"}, rounds=1
        ),
    )
    assert answer(ok)["batchgate"] == {"tool_rounds": 1}
    refused = await run(
        settings_for(simulator),
        leased("mcp no token", {"type": "mcp", "url": guarded.url, "authorization": "Bearer wrong"}),
    )
    assert refused.error_code == "tool_execution_failed"
    assert refused.error_message == "Tool round 1 failed: the MCP server refused initialize with HTTP 401."


async def test_mcp_is_error_goes_to_the_model_and_a_json_rpc_error_fails(
    simulator: str, servers: dict[str, Any]
) -> None:
    mcp = servers["stateful"]
    broken = await run(
        settings_for(simulator),
        leased("mcp broken", {"type": "mcp", "url": mcp.url}, rounds=1, tool_name="broken", echo=True),
    )
    seen = orjson.loads(answer(broken)["choices"][0]["message"]["content"])
    assert seen["messages"][-1] == {
        "role": "tool",
        "tool_call_id": seen["messages"][-2]["tool_calls"][0]["id"],
        "content": "no such row",
    }
    exploded = await run(
        settings_for(simulator),
        leased("mcp explode", {"type": "mcp", "url": mcp.url}, rounds=1, tool_name="explode"),
    )
    assert exploded.error_code == "tool_execution_failed"
    assert (
        exploded.error_message
        == "Tool round 1 failed: the MCP server answered JSON-RPC error -32000: the lookup backend is down."
    )


async def test_the_loop_runs_on_an_anthropic_model_through_the_translation(
    simulator: str, servers: dict[str, Any]
) -> None:
    claude = ProviderConfig(name="claude", kind="anthropic", base_url=f"{simulator}/v1", api_keys=("a",))
    base = settings_for(simulator)
    settings = dataclasses.replace(
        base, providers=(claude,), models=(ModelConfig(name="gpt-4o-mini", provider="claude"),)
    )
    http = servers["http"]
    outcome = await run(settings, leased("via claude", {"url": http.url}, rounds=0))
    body = answer(outcome)  # the simulator's Messages API asks for a tool once per conversation
    assert body["batchgate"] == {"tool_rounds": 1} and body["choices"][0]["finish_reason"] == "stop"
    (post,) = for_record(http.requests(), "rec-via claude")
    assert post.body["tool_calls"][0]["function"]["name"] == "lookup"
