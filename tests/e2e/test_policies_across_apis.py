"""Issue 17's policies, scopes and budget holds reach the APIs that arrived beside it: Message
Batches (the `anthropic` SDK) and the dry run, which reports the hold a create would place
without placing it."""

from __future__ import annotations

import uuid

import anthropic
import pytest

from tests.e2e.test_dry_run import stored
from tests.e2e.test_keys_and_budgets import cli, new_key
from tests.message_batch_support import NATIVE, TRANSLATED, params, sdk
from tests.support import RunningStack, chat_records, upload


def _project(stack: RunningStack, kind: str, *policy: str) -> str:
    project = f"{kind}-{uuid.uuid4().hex[:6]}"
    cli(stack, "projects", "create", project, *policy)
    return project


def test_message_batches_follow_the_policy_scopes_and_holds(shared_stack: RunningStack) -> None:
    project = _project(shared_stack, "mb-policy", "--allow-models", NATIVE)
    key_id = new_key(shared_stack, project)
    client = sdk(shared_stack, project)
    with pytest.raises(anthropic.BadRequestError) as refused:
        client.messages.batches.create(requests=[{"custom_id": "a", "params": params(TRANSLATED, "hi")}])
    assert refused.value.body["error"]["rejected_records"][0]["code"] == "model_not_allowed"

    cli(shared_stack, "keys", "set-budget", key_id, "0.000000001")
    with pytest.raises(anthropic.APIStatusError) as held:
        client.messages.batches.create(requests=[{"custom_id": "c", "params": params(NATIVE, "hi")}])
    assert held.value.status_code == 402
    assert "holds up to" in held.value.body["error"]["message"]  # the hold, not the spend so far
    cli(shared_stack, "keys", "set-budget", key_id, "none")
    made = client.messages.batches.create(requests=[{"custom_id": "b", "params": params(NATIVE, "hi")}])
    assert made.id.startswith("msgbatch_")

    new_key(shared_stack, project, "--scopes", "batches:read")
    reader = sdk(shared_stack, project)
    assert made.id in {b.id for b in reader.messages.batches.list(limit=100).data}
    with pytest.raises(anthropic.PermissionDeniedError):
        reader.messages.batches.create(requests=[{"custom_id": "d", "params": params(NATIVE, "hi")}])


def test_a_dry_run_applies_the_policy_and_reports_the_hold_without_placing_it(
    shared_stack: RunningStack,
) -> None:
    project = _project(shared_stack, "dry-policy", "--allow-models", "gpt-4o")
    key_id = new_key(shared_stack, project)
    client = shared_stack.client(project)
    records = chat_records(1, model="gpt-4o-mini", prefix="mini") + chat_records(
        2, model="gpt-4o", prefix="big"
    )
    source = upload(client, records)

    def dry() -> dict[str, object]:
        batch = client.batches.create(
            input_file_id=source.id,
            endpoint="/v1/chat/completions",
            completion_window="24h",
            extra_body={"dry_run": True},
        )
        assert [r["code"] for r in batch.model_extra["rejected_records"]] == ["model_not_allowed"]
        return dict(batch.model_extra["estimate"])

    fits = dry()
    assert fits["hold_usd"] > 0 and fits["hold_verdict"] == "fits"

    cli(shared_stack, "keys", "set-budget", key_id, "0.000000001")
    before = stored(shared_stack)
    over = dry()
    assert over["hold_usd"] == fits["hold_usd"]
    assert over["hold_verdict"] == "key_budget_exceeded" and "holds up to" in str(over["hold_message"])
    assert stored(shared_stack) == before  # no hold, no batch


def test_guardrails_screen_message_batch_requests(shared_stack: RunningStack) -> None:
    project = _project(shared_stack, "mb-guard")
    cli(shared_stack, "projects", "set-guardrails", project, "--block-keywords", "forbidden")
    new_key(shared_stack, project)
    client = sdk(shared_stack, project)
    with pytest.raises(anthropic.BadRequestError) as blocked:
        client.messages.batches.create(
            requests=[{"custom_id": "x", "params": params(NATIVE, "a Forbidden word")}]
        )
    (rejection,) = blocked.value.body["error"]["rejected_records"]
    assert (rejection["code"], rejection["custom_id"]) == ("guardrail_blocked", "x")
    assert "keyword:forbidden" in rejection["message"]
    system = [{"type": "text", "text": "never say forbidden"}]
    with pytest.raises(anthropic.BadRequestError):
        client.messages.batches.create(
            requests=[{"custom_id": "y", "params": params(NATIVE, "hello", system=system)}]
        )
    assert client.messages.batches.create(
        requests=[{"custom_id": "z", "params": params(NATIVE, "hello")}]
    ).id.startswith("msgbatch_")
