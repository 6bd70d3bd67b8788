"""Execution end to end (Envoy, the services, executors, the simulated upstream as real
processes): retries and Retry-After, final 4xx, fallback, time limit, the dead-letter view,
Anthropic translation, expiry and cancel mid-run with their lifecycle timestamps.

One stack per database kind serves the module: a provider catalogue with a fallback chain and
an Anthropic model, a fast retry policy, a model with a 1.5 s time limit, an accepted 5 s completion
window, and executors that run 8 items at a time (so batches have queued items to close).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.test_keys_and_budgets import new_key
from tests.execution_support import (
    assert_each_custom_id_once,
    create_batch,
    item_rows,
    item_states,
    result_lines,
    wait_until,
    write_catalogue,
)
from tests.support import (
    RunningStack,
    chat_records,
    free_port,
    fresh_database,
    read_jsonl,
    running_stack,
    upload,
    wait_for_batch,
)

CONCURRENCY = 8


@pytest.fixture(scope="module")
def stack(db_kind: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    tmp: Path = tmp_path_factory.mktemp(f"exec-{db_kind}")
    simulator_port = free_port()
    config = write_catalogue(tmp / "catalogue.yaml", simulator_port)
    with (
        fresh_database(db_kind, tmp) as url,
        running_stack(
            tmp,
            url,
            BATCHGATE_CONFIG=config,
            BATCHGATE_SIMULATOR_PORT=str(simulator_port),
            BATCHGATE_COMPLETION_WINDOWS="24h,5s",
            BATCHGATE_EXECUTOR_CONCURRENCY=str(CONCURRENCY),
            BATCHGATE_LEASE_TTL_S="3",
            BATCHGATE_MAINTENANCE_INTERVAL_S="0.25",
        ) as running,
    ):
        yield running


def record(custom_id: str, model: str = "gpt-4o-mini", **x_sim: object) -> dict:
    body: dict = {"model": model, "messages": [{"role": "user", "content": f"{custom_id} content"}]}
    if x_sim:
        body["x_sim"] = x_sim
    return {"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions", "body": body}


def calls_for(stack: RunningStack, custom_id: str) -> list[dict]:
    url = f"http://127.0.0.1:{stack.settings.simulator_port}/_sim/calls"
    return httpx.get(url, params={"content": f"{custom_id} content"}, timeout=10).json()


def test_a_fallback_the_keys_policy_denies_is_never_called(stack: RunningStack) -> None:
    """gpt-4o-mini falls back to gpt-4o; a key allowed gpt-4o-mini only had its records answered
    by gpt-4o, a model its project denied, at its price."""
    project = f"bounded-{uuid.uuid4().hex[:6]}"
    new_key(stack, project, "--allow-models", "gpt-4o-mini")
    client = stack.client(project)
    batch = client.batches.create(
        input_file_id=upload(client, [record("denied-fallback", fail_models=["gpt-4o-mini"])]).id,
        endpoint="/v1/chat/completions",
        completion_window="24h",
    )
    done = wait_for_batch(client, batch.id)
    assert (done.request_counts.completed, done.request_counts.failed) == (0, 1)
    assert {c["model"] for c in calls_for(stack, "denied-fallback")} == {"gpt-4o-mini"}


def test_retries_retry_after_final_4xx_fallback_and_the_time_limit(stack: RunningStack) -> None:
    client = stack.client()
    mini = create_batch(
        stack,
        [
            record("plain"),
            record("flaky", status=503, times=2),
            record("limited", status=429, times=1, retry_after=2),
            record("invalid", status=400),
            record("fallback", fail_models=["gpt-4o-mini"]),
        ],
    )
    strict = "gpt-4o-strict"
    slow = create_batch(stack, [record("slow", model=strict, delay_ms=5000), record("quick", model=strict)])
    done = wait_for_batch(client, mini.id)
    assert done.status == "completed"
    assert (done.request_counts.completed, done.request_counts.failed) == (4, 1)
    output, errors = result_lines(client, done)
    by_id = {line["custom_id"]: line for line in output + errors}
    assert_each_custom_id_once(output, errors, ["plain", "flaky", "limited", "invalid", "fallback"])

    assert [c["status"] for c in calls_for(stack, "flaky")] == [503, 503, 200]
    first, second = calls_for(stack, "limited")
    assert (first["status"], second["status"]) == (429, 200)
    assert second["at"] - first["at"] >= 1.9  # Retry-After: 2, where the backoff alone is 0.1 s

    invalid = by_id["invalid"]
    assert invalid in errors and invalid["error"] is None
    assert invalid["response"]["status_code"] == 400
    assert invalid["response"]["body"]["error"]["code"] == "sim_400"
    assert len(calls_for(stack, "invalid")) == 1  # final: not retried

    assert by_id["fallback"]["response"]["body"]["model"] == "gpt-4o"
    assert [c["model"] for c in calls_for(stack, "fallback")] == ["gpt-4o-mini"] * 3 + ["gpt-4o"]
    rows = {row.custom_id: row for row in item_rows(stack.database_url, mini.id)}
    assert rows["fallback"].model_used == "gpt-4o" and rows["fallback"].attempts == 4
    assert rows["plain"].model_used == "gpt-4o-mini" and rows["flaky"].attempts == 3

    # The dead-letter view lists exactly the failures, in the error-file shape.
    failed = httpx.get(
        f"{stack.base_url}/batches/{mini.id}/results",
        params={"state": "failed"},
        headers={"Authorization": f"Bearer {stack.key}"},
        timeout=10,
    )
    assert failed.status_code == 200
    assert [line["custom_id"] for line in read_jsonl(failed.content)] == ["invalid"]

    done = wait_for_batch(client, slow.id)
    output, errors = result_lines(client, done)
    assert [line["custom_id"] for line in output] == ["quick"]
    (timed_out,) = errors
    assert timed_out["custom_id"] == "slow" and timed_out["response"] is None
    assert timed_out["error"]["code"] == "request_timeout"
    assert len(calls_for(stack, "slow")) == 3  # timeouts are retried; this model has no fallback


def test_anthropic_model_answers_in_the_chat_completion_shape(stack: RunningStack) -> None:
    client = stack.client()
    tool = {
        "type": "function",
        "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}},
    }
    records = [record(f"claude-{i}", model="claude-haiku-4-5") for i in range(3)]
    records[2]["body"] |= {"tools": [tool], "max_tokens": 64}
    done = wait_for_batch(client, create_batch(stack, records).id)
    assert done.status == "completed" and done.request_counts.completed == 3
    assert done.usage.input_tokens > 0 and done.usage.output_tokens > 0
    output, _ = result_lines(client, done)
    bodies = {line["custom_id"]: line["response"]["body"] for line in output}
    assert bodies["claude-0"]["object"] == "chat.completion"
    assert bodies["claude-0"]["choices"][0]["finish_reason"] == "stop"
    assert "claude-0 content" in bodies["claude-0"]["choices"][0]["message"]["content"]
    assert bodies["claude-0"]["usage"]["prompt_tokens"] > 0
    tool_call = bodies["claude-2"]["choices"][0]
    assert tool_call["finish_reason"] == "tool_calls"
    assert tool_call["message"]["tool_calls"][0]["function"]["name"] == "lookup"
    assert all(c["api_key"] == "sim-a" for c in calls_for(stack, "claude-0"))


def test_expiry_mid_run_keeps_finished_results_and_expires_the_rest(stack: RunningStack) -> None:
    client = stack.client()
    fast = [record(f"exp-fast-{i}") for i in range(CONCURRENCY)]
    slow = [record(f"exp-slow-{i}", delay_ms=60_000) for i in range(3 * CONCURRENCY)]
    batch = create_batch(stack, fast + slow, window="5s")
    assert batch.expires_at - batch.created_at == 5
    done = wait_for_batch(client, batch.id, timeout_s=90)
    assert done.status == "expired"
    assert done.expired_at is not None and done.finalizing_at is not None
    assert done.completed_at is None and done.cancelled_at is None and done.failed_at is None
    assert done.in_progress_at <= done.finalizing_at <= done.expired_at
    output, errors = result_lines(client, done)
    assert_each_custom_id_once(output, errors, [r["custom_id"] for r in fast + slow])
    assert done.request_counts.completed == len(output) >= 1  # finished results stay
    assert done.request_counts.failed == len(errors)
    slow_ids = {r["custom_id"] for r in slow}
    expired = [line for line in errors if line["custom_id"] in slow_ids]
    # Slow items were running (leased) or queued at the deadline: all are closed, none waited for.
    assert len(expired) == len(slow)
    assert all(line["error"]["code"] == "batch_expired" and line["response"] is None for line in expired)


def test_cancel_mid_run_keeps_finished_and_in_flight_results(stack: RunningStack) -> None:
    client = stack.client()
    first_wave = [record(f"cx-fast-{i}") for i in range(CONCURRENCY)]
    second_wave = [record(f"cx-slow-{i}", delay_ms=15_000) for i in range(CONCURRENCY)]
    rest = [record(f"cx-queued-{i}") for i in range(2 * CONCURRENCY)]
    batch = create_batch(stack, first_wave + second_wave + rest)
    # The first wave is done and the second is running upstream: cancel now. The executor may
    # hold some of the rest already (it leases ahead); those have not started and must not.
    wait_until(
        "second wave running",
        lambda: (
            item_states(stack.database_url, batch.id)["succeeded"] == CONCURRENCY
            and all(calls_for(stack, r["custom_id"]) for r in second_wave)
        ),
        timeout_s=60,
    )
    cancelling = client.batches.cancel(batch.id)
    assert cancelling.status == "cancelling" and cancelling.cancelling_at is not None
    wait_until(
        "the rest closed while the second wave still runs",
        lambda: item_states(stack.database_url, batch.id) == {"succeeded": 8, "leased": 8, "cancelled": 16},
        timeout_s=12,
    )
    done = wait_for_batch(client, batch.id, timeout_s=60)
    assert done.status == "cancelled"
    assert done.cancelling_at <= done.finalizing_at <= done.cancelled_at
    assert done.completed_at is None and done.expired_at is None
    output, errors = result_lines(client, done)
    assert_each_custom_id_once(output, errors, [r["custom_id"] for r in first_wave + second_wave + rest])
    assert {line["custom_id"] for line in output} == {r["custom_id"] for r in first_wave + second_wave}
    assert {line["custom_id"] for line in errors} == {r["custom_id"] for r in rest}
    assert all(line["error"]["code"] == "batch_cancelled" for line in errors)
    assert not any(calls_for(stack, r["custom_id"]) for r in rest), "a cancelled item reached the upstream"
    assert (done.request_counts.completed, done.request_counts.failed) == (16, 16)
    # Cancelling again is harmless and changes nothing.
    assert client.batches.cancel(batch.id).status == "cancelled"


def test_completed_batch_has_every_lifecycle_timestamp_in_order(stack: RunningStack) -> None:
    client = stack.client()
    started = time.time()
    done = wait_for_batch(client, create_batch(stack, chat_records(3, prefix="stamps")).id)
    assert done.status == "completed"
    assert (
        int(started) - 1 <= done.created_at <= done.in_progress_at <= done.finalizing_at <= done.completed_at
    )
    assert done.cancelling_at is None and done.cancelled_at is None and done.expired_at is None
