"""`batchgate.workflow` at create: defaults, caps (the token cap from the settings), and one
precise rejection per mistake; the callback URL goes through the same address gate as tool
servers."""

from __future__ import annotations

import json
from typing import Any

import pytest

from batchgate.services.common.loading import load_settings
from batchgate.services.ingest.tool_url_gate import ToolUrlGate
from batchgate.services.ingest.validation import Accepted, RecordChecker, Rejected

ENDPOINT = "/v1/chat/completions"
URL = "https://callback.example/steps"
ENV = {
    "BATCHGATE_REQUEST_TIMEOUT_S": "60",
    "BATCHGATE_WORKFLOW_MAX_TOKENS": "5000",
    "BATCHGATE_WORKFLOW_MAX_TOKENS_CAP": "9000",
}


def line(workflow: Any, **body: Any) -> bytes:
    request = {
        "model": "gpt-4o-mini",
        "messages": [{"role": "user", "content": "hi"}],
        "batchgate": {"workflow": workflow},
        **body,
    }
    return json.dumps({"custom_id": "w-1", "method": "POST", "url": ENDPOINT, "body": request}).encode()


def checker() -> RecordChecker:
    return RecordChecker(load_settings(environ=ENV), ENDPOINT)


def stored(outcome: Accepted | Rejected) -> dict[str, Any]:
    assert isinstance(outcome, Accepted), outcome
    workflow: dict[str, Any] = json.loads(outcome.body)["batchgate"]["workflow"]
    return workflow


def test_omitted_fields_take_the_defaults_and_large_ones_the_caps() -> None:
    assert stored(checker().check(line({"url": URL, "max_steps": 0}))) == {
        "url": URL,
        "max_steps": 8,
        "max_requests": 64,
        "max_tokens": 5000,
        "timeout_ms": 30_000,
    }
    big = {"url": URL, "max_steps": 99, "max_requests": 5000, "max_tokens": 10**9, "timeout_ms": 10**9}
    capped = stored(checker().check(line({**big, "authorization": "Bearer x", "context": [1]})))
    assert capped == {
        "url": URL,
        "max_steps": 32,
        "max_requests": 1024,
        "max_tokens": 9000,
        "timeout_ms": 60_000,
        "authorization": "Bearer x",
        "context": [1],
    }


@pytest.mark.parametrize(
    ("workflow", "message"),
    [
        ("yes", "'batchgate.workflow' must be an object."),
        ({}, "'workflow.url' must be a non-empty string."),
        ({"url": "ftp://x.example/"}, "'workflow.url' is not usable"),
        ({"url": URL, "max_requests": -1}, "'workflow.max_requests' must not be negative."),
        ({"url": URL, "max_tokens": "many"}, "'workflow.max_tokens' must be an integer."),
        ({"url": URL, "authorization": "a\nb"}, "'workflow.authorization' must not contain control"),
        ({"url": "https://u@flows.example/"}, "'workflow.url' must not hold credentials"),
        ({"url": URL, "steps": 3}, "'workflow' has unknown field(s) steps."),
    ],
)
def test_each_mistake_is_one_invalid_workflow_rejection(workflow: Any, message: str) -> None:
    outcome = checker().check(line(workflow))
    assert isinstance(outcome, Rejected) and outcome.code == "invalid_workflow", outcome
    assert outcome.message.startswith(message) and outcome.custom_id == "w-1"


def test_a_record_cannot_be_both_a_workflow_and_a_tool_loop() -> None:
    tools = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    request = line({"url": URL}, tools=tools)
    record = json.loads(request)
    record["body"]["batchgate"]["tool_config"] = {"url": URL}
    outcome = checker().check(json.dumps(record).encode())
    assert isinstance(outcome, Rejected) and outcome.code == "invalid_workflow"


async def test_callback_urls_obey_the_private_address_policy() -> None:
    settings = load_settings(environ=ENV)
    gate = ToolUrlGate(settings)
    private = await gate.admit(RecordChecker(settings, ENDPOINT).check(line({"url": "http://10.1.2.3/cb"})))
    assert isinstance(private, Rejected) and private.code == "invalid_workflow"
    assert private.message.startswith("'workflow.url' may not be called")
