"""Workflows interrupted, end to end. Requests stopped at their time limit (a model with a
1.5 s limit, `tests.execution_support.write_catalogue`) come back to the callback as failed
results and the record runs on. A record whose callback keeps asking for slow requests is
stopped between steps: a cancel ends it as an error line `batch_cancelled` that names the
step, billed for the requests that ran; an expiry drops it (`batch_expired`) and the callback
hears nothing more of it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from tests.e2e.test_keys_and_budgets import cli
from tests.execution_support import create_batch, result_lines, wait_until, write_catalogue
from tests.support import RunningStack, free_port, fresh_database, running_stack, wait_for_batch
from tests.workflow_servers import WorkflowCallbackServer

USAGE = {"prompt_tokens": 10, "completion_tokens": 3}


@pytest.fixture(scope="module")
def world(db_kind: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp: Path = tmp_path_factory.mktemp(f"workflow-stops-{db_kind}")
    simulator_port = free_port()
    env = {
        "BATCHGATE_CONFIG": write_catalogue(tmp / "catalogue.yaml", simulator_port),
        "BATCHGATE_SIMULATOR_PORT": str(simulator_port),
        "BATCHGATE_COMPLETION_WINDOWS": "24h,5s",
        "BATCHGATE_MAINTENANCE_INTERVAL_S": "0.25",
    }
    with (
        WorkflowCallbackServer() as callback,
        fresh_database(db_kind, tmp) as url,
        running_stack(tmp, url, **env) as stack,
    ):
        cli(stack, "projects", "set-policy", "default", "--features", "workflows")
        yield {"stack": stack, "callback": callback}


def endless(custom_id: str, url: str) -> dict[str, Any]:
    """A workflow that asks for one slow request per step, up to 32 steps."""
    slow = {"usage": USAGE, "delay_ms": 400}
    workflow = {"url": url, "max_steps": 32, "context": {"mode": "forever", "x_sim": slow}}
    body = {
        "model": "gpt-4o-mini",
        "messages": [{"role": "user", "content": f"document {custom_id}"}],
        "x_sim": slow,
        "batchgate": {"workflow": workflow},
    }
    return {"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions", "body": body}


def _posts(callback: WorkflowCallbackServer, custom_id: str) -> list[Any]:
    return [r for r in callback.requests() if r.body["custom_id"] == custom_id]


def test_cancel_mid_workflow_ends_it_with_the_step_and_bills_what_ran(world: dict[str, Any]) -> None:
    stack: RunningStack = world["stack"]
    callback: WorkflowCallbackServer = world["callback"]
    batch = create_batch(stack, [endless("cancel-me", callback.url)])
    wait_until("step 2 posted", lambda: len(_posts(callback, "cancel-me")) >= 3, timeout_s=60)
    client = stack.client()
    client.batches.cancel(batch.id)
    done = wait_for_batch(client, batch.id, timeout_s=60)
    assert done.status == "cancelled"
    output, errors = result_lines(client, done)
    assert output == [] and len(errors) == 1
    error = errors[0]["error"]
    assert error["code"] == "batch_cancelled"
    assert error["message"].startswith("Workflow step ") and "the batch was cancelled" in error["message"]
    posts = _posts(callback, "cancel-me")
    assert len(posts) < 32
    ran = sum(len(p.body["results"]) for p in posts)
    assert done.usage.input_tokens == 10 * ran  # every request that ran is billed
    # it ended cancelled, so a retry of what was cancelled takes it and one of what failed does not
    with pytest.raises(openai.BadRequestError) as refused:
        client.post(f"/batches/{batch.id}/retry", body={"only": "failed"}, cast_to=object)
    assert refused.value.body["code"] == "nothing_to_retry"
    again = client.post(f"/batches/{batch.id}/retry", body={"only": "cancelled"}, cast_to=object)
    assert again["request_counts"]["total"] == 1
    client.batches.cancel(again["id"])
    wait_for_batch(client, again["id"], timeout_s=60)


def test_expiry_mid_workflow_drops_it_and_the_callback_hears_no_more(world: dict[str, Any]) -> None:
    stack: RunningStack = world["stack"]
    callback: WorkflowCallbackServer = world["callback"]
    batch = create_batch(stack, [endless("expire-me", callback.url)], window="5s")
    client = stack.client()
    done = wait_for_batch(client, batch.id, timeout_s=90)
    assert done.status == "expired"
    output, errors = result_lines(client, done)
    assert output == [] and [e["error"]["code"] for e in errors] == ["batch_expired"]
    seen = len(_posts(callback, "expire-me"))
    assert 1 <= seen < 32
    time.sleep(2)
    assert len(_posts(callback, "expire-me")) <= seen + 1  # at most the step in flight


def test_requests_stopped_at_the_time_limit_are_failed_results_and_the_record_runs_on(
    world: dict[str, Any],
) -> None:
    stack: RunningStack = world["stack"]
    callback: WorkflowCallbackServer = world["callback"]
    body = {
        "model": "gpt-4o-strict",
        "messages": [{"role": "user", "content": "document slow-maps"}],
        "x_sim": {"usage": USAGE},
        "batchgate": {"workflow": {"url": callback.url, "context": {"maps": 2, "x_sim": {"delay_ms": 5000}}}},
    }
    record = {"custom_id": "slow-maps", "method": "POST", "url": "/v1/chat/completions", "body": body}
    client = stack.client()
    done = wait_for_batch(client, create_batch(stack, [record]).id, timeout_s=120)
    output, errors = result_lines(client, done)
    assert errors == [] and len(output) == 1
    result = output[0]["response"]["body"]
    assert (result["steps"], result["requests"]) == (3, 4)  # 1 + 2 maps + 1 reduce
    assert result["output"]["summary"] == "<failed: request_timeout>"
    assert result["usage"]["prompt_tokens"] == 10 and done.usage.input_tokens == 10  # only step 0 ran
    maps = next(p for p in _posts(callback, "slow-maps") if p.body["step"] == 1).body["results"]
    assert sorted(r["id"] for r in maps) == ["map-0", "map-1"]
    assert all(r["error"]["code"] == "request_timeout" for r in maps)
