"""Records that loop and budgets (README "Budgets and budget holds", "Tool calling",
"Workflows"): a tool-calling or workflow record holds its `max_tokens` (prompt + completion over
all its model calls) at the model's higher price, and the executor starts no model call that
could take the record past them. A hold of one call let ten tool records spend $0.40 of a $0.01
budget, with `hold_verdict: fits`."""

from __future__ import annotations

import json
import uuid
from typing import Any

import openai
import pytest

from batchgate.services.common.record_texts import request_tokens
from tests.e2e.test_keys_and_budgets import cli, new_key
from tests.support import RunningStack, upload, wait_for_batch
from tests.tool_servers import HttpToolServer
from tests.workflow_servers import WorkflowCallbackServer

TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]
USAGE = {"prompt_tokens": 10, "completion_tokens": 3}
HIGHER_PRICE = 0.6  # gpt-4o-mini on the simulator, $ per million tokens: its output price
DISCOUNT = 0.5  # a standard batch's
DEFAULT_MAX_TOKENS = 200_000  # `workflow_max_tokens`, every loop's default
HOLD_MAX_TOKENS = 4096  # the model's output allowance where a request sets none


def tool_record(custom_id: str, tool_url: str, **config: Any) -> dict[str, Any]:
    body = {
        "model": "gpt-4o-mini",
        "max_tokens": 20,
        "messages": [{"role": "user", "content": f"question {custom_id}"}],
        "tools": TOOLS,
        "x_sim": {"tool_rounds": 3, "usage": USAGE},
        "batchgate": {"tool_config": {"url": tool_url, **config}},
    }
    return {"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions", "body": body}


def workflow_record(custom_id: str, callback_url: str, **config: Any) -> dict[str, Any]:
    workflow = {"url": callback_url, "context": {"x_sim": {"usage": USAGE}}, **config}
    body = {
        "model": "gpt-4o-mini",
        "messages": [{"role": "user", "content": f"document {custom_id}"}],
        "x_sim": {"usage": USAGE},
        "batchgate": {"workflow": workflow},
    }
    return {"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions", "body": body}


def first_call(record: dict[str, Any]) -> dict[str, Any]:
    """The body of a record's first model call: without its `batchgate` section."""
    return {k: v for k, v in record["body"].items() if k != "batchgate"}


def project_with(stack: RunningStack, *flags: str) -> openai.OpenAI:
    project = f"loops-{uuid.uuid4().hex[:6]}"
    cli(stack, "projects", "create", project, *flags)
    new_key(stack, project)
    return stack.client(project)


def test_tool_and_workflow_records_hold_their_max_tokens(shared_stack: RunningStack) -> None:
    """The QA case: ten tool records on a $0.01 budget are refused at create, naming a hold of
    their default max_tokens; a workflow record holds what its own max_tokens says."""
    client = project_with(shared_stack, "--budget", "0.01", "--features", "workflows")
    with HttpToolServer() as tools, WorkflowCallbackServer() as callback:
        for records, tokens in (
            ([tool_record(f"t{n}", tools.url) for n in range(10)], 10 * DEFAULT_MAX_TOKENS),
            ([workflow_record("w", callback.url, max_tokens=50_000)], 50_000),
        ):
            file_id = upload(client, records).id
            with pytest.raises(openai.APIStatusError) as refused:
                client.batches.create(
                    input_file_id=file_id, endpoint="/v1/chat/completions", completion_window="24h"
                )
            error: dict[str, Any] = refused.value.body  # type: ignore[assignment]
            assert (refused.value.status_code, error["code"]) == (402, "project_budget_exceeded"), error
            assert error["hold_usd"] == pytest.approx(tokens * HIGHER_PRICE / 1e6 * DISCOUNT, rel=1e-6)
        assert tools.requests() == [] and callback.requests() == []


def test_no_tool_round_starts_a_model_turn_that_could_pass_max_tokens(shared_stack: RunningStack) -> None:
    """Room for the first turn and no more: each record runs one turn and its tool round, then
    ends `tool_limit_exceeded` without the second turn, billed for the first, as a workflow is."""
    client = project_with(shared_stack)
    with HttpToolServer() as tools:
        need = request_tokens(first_call(tool_record("t0", tools.url)), HOLD_MAX_TOKENS)
        records = [tool_record(f"t{n}", tools.url, max_tokens=need + 5) for n in range(3)]
        file_id = upload(client, records).id
        batch = client.batches.create(
            input_file_id=file_id, endpoint="/v1/chat/completions", completion_window="24h"
        )
        done = wait_for_batch(client, batch.id, timeout_s=120)
        assert len(tools.requests()) == 3  # round 1 of each record
    assert (done.request_counts.completed, done.request_counts.failed) == (0, 3)
    assert done.error_file_id is not None
    for line in client.files.content(done.error_file_id).text.splitlines():
        parsed = json.loads(line)
        assert parsed["error"]["code"] == "tool_limit_exceeded", parsed
        assert "Model turn 2 could bring the record to" in parsed["error"]["message"]
    assert done.usage is not None and done.usage.total_tokens == 3 * 13  # each record's one turn


def test_no_workflow_step_starts_that_could_pass_max_tokens(shared_stack: RunningStack) -> None:
    """Room for step 0 alone: the callback's three map requests are never sent; the record ends
    `workflow_limit_exceeded` at step 1 with step 0's usage billed."""
    client = project_with(shared_stack, "--features", "workflows")
    with WorkflowCallbackServer() as callback:
        record = workflow_record("w", callback.url)
        need = request_tokens(first_call(record), HOLD_MAX_TOKENS)
        record["body"]["batchgate"]["workflow"]["max_tokens"] = need + 5
        file_id = upload(client, [record]).id
        batch = client.batches.create(
            input_file_id=file_id, endpoint="/v1/chat/completions", completion_window="24h"
        )
        done = wait_for_batch(client, batch.id, timeout_s=120)
        assert len(callback.requests()) == 1  # step 0's results, answered with three maps
    assert done.request_counts.failed == 1 and done.error_file_id is not None
    (line,) = client.files.content(done.error_file_id).text.splitlines()
    parsed = json.loads(line)
    assert parsed["error"]["code"] == "workflow_limit_exceeded", parsed
    assert parsed["error"]["message"].startswith("Workflow step 1: its requests could bring it to")
    assert done.usage is not None and done.usage.total_tokens == 13  # step 0's one call
