"""The item runner against the simulated upstream over real HTTP: retries, Retry-After, final
4xx, fallback, time limit, the key pool, and the Anthropic adapter on the wire."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import multiprocessing
import re
from typing import Any

import httpx
import orjson
import pytest
from aiohttp import web

from batchgate.internal.v1 import items_pb2, recorder_pb2, scheduler_pb2
from batchgate.services.common.catalogue import ModelConfig, ProviderConfig, RetryPolicy
from batchgate.services.common.config import Settings
from batchgate.services.common.loading import load_settings
from batchgate.services.executor.outcomes import NotStarted
from batchgate.services.executor.runner import Control, ItemRunner
from batchgate.services.executor.upstream import fallback_request_id
from tests.loopback import LoopbackServer

FAST_RETRY = RetryPolicy(initial_interval_s=0.05, backoff_coefficient=2.0, max_interval_s=0.2, max_attempts=3)
_numbers = itertools.count()


def settings_for(base: str, openai_keys: tuple[str, ...] = ("k1",), **provider: Any) -> Settings:
    providers = (
        ProviderConfig(name="oai", kind="openai", base_url=f"{base}/v1", api_keys=openai_keys, **provider),
        ProviderConfig(name="claude", kind="anthropic", base_url=f"{base}/v1", api_keys=("a1",), **provider),
    )
    models = (
        ModelConfig(name="gpt-4o-mini", provider="oai", fallbacks=("gpt-4o",)),
        ModelConfig(name="gpt-4o", provider="oai"),
        ModelConfig(name="claude-haiku", provider="claude", upstream_model="claude-haiku-4-5-20251001"),
    )
    return dataclasses.replace(
        load_settings(environ={}), providers=providers, models=models, retry=FAST_RETRY
    )


def leased(body: dict[str, Any], model: str = "gpt-4o-mini") -> scheduler_pb2.LeasedItem:
    return scheduler_pb2.LeasedItem(
        ref=items_pb2.ItemRef(batch_id="batch_t", index=next(_numbers), attempt=1),
        custom_id="c",
        endpoint="/v1/chat/completions",
        model=model,
        body=orjson.dumps({"model": model, **body}),
    )


def chat(text: str, **extra: Any) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}], **extra}


async def calls(base: str, content: str) -> list[dict[str, Any]]:
    async with httpx.AsyncClient() as client:
        return (await client.get(f"{base}/_sim/calls", params={"content": content})).json()


async def run(settings: Settings, item: scheduler_pb2.LeasedItem) -> recorder_pb2.Outcome:
    runner = ItemRunner(settings)
    try:
        return await runner.run(item)
    finally:
        await runner.close()


@pytest.mark.parametrize("status", [503, 501, 520, 524])
async def test_5xx_is_retried_then_succeeds(simulator: str, status: int) -> None:
    """Every 5xx, as README says: a proxy's 520 or 524 (and 501, 507) were final at once."""
    content = f"five hundred {status}"
    outcome = await run(settings_for(simulator), leased(chat(content, x_sim={"status": status, "times": 2})))
    assert outcome.state == recorder_pb2.OUTCOME_STATE_SUCCEEDED
    assert outcome.attempts == 3 and outcome.model == "gpt-4o-mini" and outcome.status_code == 200
    assert [c["status"] for c in await calls(simulator, content)] == [status, status, 200]


async def test_4xx_is_final_and_keeps_the_upstream_error(simulator: str) -> None:
    outcome = await run(settings_for(simulator), leased(chat("bad request", x_sim={"status": 400})))
    assert outcome.state == recorder_pb2.OUTCOME_STATE_FAILED
    assert outcome.attempts == 1 and outcome.status_code == 400
    assert orjson.loads(outcome.response_body)["error"]["code"] == "sim_400"
    assert len(await calls(simulator, "bad request")) == 1


async def test_a_429s_retry_after_is_the_items_own_wait(simulator: str) -> None:
    item = leased(chat("slow down", x_sim={"status": 429, "times": 1, "retry_after": 1}))
    runner = ItemRunner(settings_for(simulator))
    try:
        outcome = await runner.run(item)
        key = runner._providers["oai"].lane.keys.keys[0]
        assert key.resting_until == 0  # a plain 429 does not rest the whole key
    finally:
        await runner.close()
    assert outcome.state == recorder_pb2.OUTCOME_STATE_SUCCEEDED and outcome.attempts == 2
    first, second = await calls(simulator, "slow down")
    assert (first["status"], second["status"]) == (429, 200)
    assert second["at"] - first["at"] >= 0.95  # the backoff alone would be 0.05 s


SPENT = {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "10m0s"}


async def test_a_spent_window_rests_the_key_and_the_retry_moves_to_the_next(simulator: str) -> None:
    settings = settings_for(simulator, openai_keys=("k1", "k2"))
    item = leased(chat("key one is spent", x_sim={"status": 429, "keys": ["k1"], "headers": SPENT}))
    outcome = await run(settings, item)
    assert outcome.state == recorder_pb2.OUTCOME_STATE_SUCCEEDED
    assert [(c["api_key"], c["status"]) for c in await calls(simulator, "key one is spent")] == [
        ("k1", 429),
        ("k2", 200),
    ]


async def test_keys_take_turns_and_a_resting_one_sits_out(simulator: str) -> None:
    runner = ItemRunner(settings_for(simulator, openai_keys=("k1", "k2", "k3")))
    try:
        for n in range(3):
            await runner.run(leased(chat(f"turns {n}")))
        await runner.run(
            leased(chat("turns limited", x_sim={"status": 429, "keys": ["k1"], "headers": SPENT}))
        )
        for n in range(3, 7):
            await runner.run(leased(chat(f"turns {n}")))
    finally:
        await runner.close()
    used = [(await calls(simulator, f"turns {n}"))[0]["api_key"] for n in range(7)]
    assert used[:3] == ["k1", "k2", "k3"]
    assert set(used[3:]) == {"k2", "k3"}  # k1 rests for ten minutes


async def test_fallback_runs_once_the_models_retries_are_spent(simulator: str) -> None:
    item = leased(chat("primary is down", x_sim={"fail_models": ["gpt-4o-mini"]}))
    outcome = await run(settings_for(simulator), item)
    assert outcome.state == recorder_pb2.OUTCOME_STATE_SUCCEEDED
    assert outcome.model == "gpt-4o" and outcome.attempts == 4
    assert orjson.loads(outcome.response_body)["model"] == "gpt-4o"
    models = [c["model"] for c in await calls(simulator, "primary is down")]
    assert models == ["gpt-4o-mini"] * 3 + ["gpt-4o"]


async def test_spent_retries_and_fallbacks_end_in_the_last_error(simulator: str) -> None:
    item = leased(chat("all down", x_sim={"status": 500}))
    outcome = await run(settings_for(simulator), item)
    assert outcome.state == recorder_pb2.OUTCOME_STATE_FAILED
    assert outcome.attempts == 6 and outcome.model == "gpt-4o" and outcome.status_code == 500


async def test_a_call_past_the_time_limit_is_stopped_as_request_timeout(simulator: str) -> None:
    settings = settings_for(simulator, timeout_s=0.3)
    item = leased(chat("too slow", x_sim={"delay_ms": 3000}), model="gpt-4o")
    outcome = await run(settings, item)
    assert outcome.state == recorder_pb2.OUTCOME_STATE_FAILED
    assert outcome.error_code == "request_timeout" and outcome.attempts == 3
    assert outcome.status_code == 0 and not outcome.response_body


async def test_anthropic_provider_gets_a_translated_request_with_its_headers(simulator: str) -> None:
    body = {
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "anthropic echo"},
        ],
        "stop": "END",
        "x_sim": {"echo": True},
    }
    outcome = await run(settings_for(simulator), leased(body, model="claude-haiku"))
    assert outcome.state == recorder_pb2.OUTCOME_STATE_SUCCEEDED, outcome
    completion = orjson.loads(outcome.response_body)
    assert completion["object"] == "chat.completion"
    seen = orjson.loads(completion["choices"][0]["message"]["content"])
    assert seen == {
        "model": "claude-haiku-4-5-20251001",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "anthropic echo"}]}],
        "system": "Be brief.",
        "max_tokens": 4096,
        "stop_sequences": ["END"],
    }
    assert outcome.model == "claude-haiku" and outcome.provider == "claude"
    assert outcome.usage.prompt_tokens > 0 and outcome.usage.completion_tokens > 0
    (call,) = await calls(simulator, "anthropic echo")
    assert call["api_key"] == "a1" and call["status"] == 200  # x-api-key and anthropic-version sent


async def test_anthropic_tool_use_comes_back_as_tool_calls(simulator: str) -> None:
    tool = {
        "type": "function",
        "function": {
            "name": "lookup",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
        },
    }
    body = chat("use the tool", tools=[tool], x_sim={"usage": {"cache_read_input_tokens": 5}})
    outcome = await run(settings_for(simulator), leased(body, model="claude-haiku"))
    choice = orjson.loads(outcome.response_body)["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    (call,) = choice["message"]["tool_calls"]
    assert call["type"] == "function" and call["function"]["name"] == "lookup"
    assert orjson.loads(call["function"]["arguments"]) == {"q": "simulated"}
    assert outcome.usage.cached_tokens == 5


async def test_anthropic_errors_are_retried_or_final_in_openais_shape(simulator: str) -> None:
    overloaded = leased(chat("claude overloaded", x_sim={"status": 529, "times": 1}), model="claude-haiku")
    assert (await run(settings_for(simulator), overloaded)).attempts == 2
    invalid = leased(chat("claude invalid", x_sim={"status": 400}), model="claude-haiku")
    outcome = await run(settings_for(simulator), invalid)
    assert outcome.state == recorder_pb2.OUTCOME_STATE_FAILED and outcome.status_code == 400
    assert orjson.loads(outcome.response_body) == {
        "error": {
            "message": "Simulated HTTP 400.",
            "type": "invalid_request_error",
            "param": None,
            "code": "invalid_request_error",
        }
    }


async def test_what_anthropic_cannot_do_fails_at_once_without_a_call(simulator: str) -> None:
    outcome = await run(settings_for(simulator), leased(chat("two choices", n=2), model="claude-haiku"))
    assert outcome.state == recorder_pb2.OUTCOME_STATE_FAILED and outcome.attempts == 0
    assert outcome.status_code == 400
    error = orjson.loads(outcome.response_body)["error"]
    assert error["param"] == "n" and error["code"] == "unsupported_parameter"
    assert await calls(simulator, "two choices") == []


class LocalGranter:
    """Grants every ask in full (a stand-in for the scheduler's shared budgets)."""

    def __init__(self) -> None:
        self.granted = 0.0
        self.wake: Any = None

    def ask(self, key: Any, requests: float, tokens: float) -> None:
        key.requests += requests
        key.tokens += tokens
        self.granted += tokens
        asyncio.get_running_loop().call_soon(self.wake)


async def test_token_budget_is_settled_by_the_answers_usage(simulator: str) -> None:
    granter = LocalGranter()
    runner = ItemRunner(settings_for(simulator, tokens_per_minute=6000), granter=granter)
    granter.wake = runner.dispatcher.dispatch
    try:
        outcome = await runner.run(leased(chat("budgeted " * 200, max_tokens=5000)))
        key = runner._providers["oai"].lane.keys.keys[0]
        assert outcome.state == recorder_pb2.OUTCOME_STATE_SUCCEEDED
        used = outcome.usage.prompt_tokens + outcome.usage.completion_tokens
        assert used > 400 and granter.granted >= 5000  # the estimate counts the 5,000 allowed
        assert key.tokens == pytest.approx(granter.granted - used)  # the unused allowance is back
    finally:
        await runner.close()


async def test_a_burst_of_429s_lowers_the_concurrency_not_the_key(simulator: str) -> None:
    runner = ItemRunner(settings_for(simulator, max_concurrency=8))
    provider = runner._providers["oai"]
    try:
        burst = [leased(chat(f"burst {n}", x_sim={"status": 429, "times": 1})) for n in range(8)]
        outcomes = await asyncio.gather(*(runner.run(item) for item in burst))
        assert all(o.state == recorder_pb2.OUTCOME_STATE_SUCCEEDED and o.attempts == 2 for o in outcomes)
        assert provider.lane.limit.limit < 8 and provider.lane.limit.safe is not None
        assert provider.lane.keys.keys[0].resting_until == 0
    finally:
        await runner.close()


async def test_a_stopped_item_hands_back_before_its_first_call_and_ends_after_a_started_one(
    simulator: str,
) -> None:
    runner = ItemRunner(settings_for(simulator))
    try:
        stopped = Control()
        stopped.stop.set()
        with pytest.raises(NotStarted):
            await runner.run(leased(chat("never sent")), stopped)
        assert await calls(simulator, "never sent") == []

        control = Control()
        item = leased(chat("stopped between retries", x_sim={"status": 503, "retry_after": 30}))
        running = asyncio.create_task(runner.run(item, control))
        for _ in range(250):  # until its first call was answered
            if await calls(simulator, "stopped between retries"):
                break
            await asyncio.sleep(0.02)
        control.stop.set()  # its batch was cancelled while it waits 30 s to retry
        outcome = await asyncio.wait_for(running, 5)
        assert outcome.state == recorder_pb2.OUTCOME_STATE_FAILED and outcome.status_code == 503
        assert outcome.attempts == 1 and control.started
        assert len(await calls(simulator, "stopped between retries")) == 1
    finally:
        await runner.close()


async def test_a_halted_item_waiting_for_a_slot_ends_at_once(simulator: str) -> None:
    runner = ItemRunner(settings_for(simulator, max_concurrency=1, adaptive_concurrency=False))
    try:
        control = Control()
        first = leased(chat("halted in line", x_sim={"status": 503, "times": 1, "retry_after": 0.3}))
        halted = asyncio.create_task(runner.run(first, control))
        for _ in range(250):  # until its first call was answered (it now waits 0.3 s to retry)
            if await calls(simulator, "halted in line"):
                break
            await asyncio.sleep(0.02)
        blocker = asyncio.create_task(runner.run(leased(chat("holds the slot", x_sim={"delay_ms": 3000}))))
        await asyncio.sleep(0.6)  # the retry now waits for the only slot
        assert not halted.done() and runner.dispatcher.in_flight == 1
        control.halt()  # its batch was cancelled
        outcome = await asyncio.wait_for(halted, 1)
        assert outcome.state == recorder_pb2.OUTCOME_STATE_FAILED and outcome.status_code == 503
        assert len(await calls(simulator, "halted in line")) == 1
        await blocker
    finally:
        await runner.close()


async def test_an_answer_without_a_request_id_gets_one_of_its_own() -> None:
    """Ollama and most vLLM setups send no `x-request-id`: each result still gets an id in
    OpenAI's shape, a different one for every answer."""

    async def answer(request: web.Request) -> web.Response:
        return web.json_response({"choices": [{"message": {"role": "assistant", "content": "hi"}}]})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", answer)
    server = LoopbackServer(app, "an upstream without request ids")
    server.start()
    try:
        items = ItemRunner(settings_for(f"http://127.0.0.1:{server.port}"))
        try:
            outcomes = [await items.run(leased(chat(f"no id {n}"))) for n in range(3)]
        finally:
            await items.close()
    finally:
        server.stop()
    ids = [o.request_id for o in outcomes]
    assert all(o.state == recorder_pb2.OUTCOME_STATE_SUCCEEDED for o in outcomes)
    assert all(re.fullmatch(r"req_[0-9a-f]{32}", i) for i in ids), ids
    assert len(set(ids)) == 3


def test_a_forked_process_makes_request_ids_of_its_own() -> None:
    with multiprocessing.get_context("fork").Pool(1) as pool:
        child = pool.apply(fallback_request_id)
        pool.close()  # the worker ends on its own: leaving the block would SIGTERM it
        pool.join()
    assert child[:20] != fallback_request_id()[:20]  # "req_" and the random half
