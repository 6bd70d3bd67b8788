"""Policies on projects and keys, and key scopes, as a team sees them through the `openai` SDK
(README "Keys, projects and budgets"): the operator sets them with `batchgate projects|keys`,
a key only narrows its project, and a key without a scope gets 403 `insufficient_scope`."""

from __future__ import annotations

import json
import time
import uuid

import openai
import pytest

from tests.e2e.ingest_client import create_batch, from_file, upload_records
from tests.e2e.test_keys_and_budgets import cli, new_key
from tests.support import RunningStack, chat_records, upload, wait_for_batch

ENDPOINT = "/v1/chat/completions"


def fresh_project(stack: RunningStack, kind: str, *policy: str) -> str:
    project = f"{kind}-{uuid.uuid4().hex[:6]}"
    cli(stack, "projects", "create", project, *policy)
    return project


def test_a_key_without_a_scope_gets_403_and_misses_stay_404(shared_stack: RunningStack) -> None:
    project = fresh_project(shared_stack, "scopes")
    new_key(shared_stack, project, "--scopes", "batches:read,files:read")
    reader = shared_stack.client(project)
    assert reader.batches.list().data == []
    assert reader.files.list().data == []
    with pytest.raises(openai.PermissionDeniedError) as caught:
        reader.files.create(file=("x.jsonl", b"{}\n"), purpose="batch")
    assert (caught.value.status_code, caught.value.code) == (403, "insufficient_scope")
    assert "files:write" in caught.value.message
    with pytest.raises(openai.PermissionDeniedError):
        reader.batches.create(input_file_id="file-x", endpoint=ENDPOINT, completion_window="24h")
    # Another project's batch is still "not found", never "forbidden".
    theirs = shared_stack.client().batches.create(
        input_file_id=upload(shared_stack.client(), chat_records(1, prefix="theirs")).id,
        endpoint=ENDPOINT,
        completion_window="24h",
    )
    with pytest.raises(openai.NotFoundError):
        reader.batches.retrieve(theirs.id)

    new_key(shared_stack, project, "--scopes", "files:write")
    writer = shared_stack.client(project)
    assert writer.files.create(file=("x.jsonl", b"{}\n"), purpose="batch").id
    with pytest.raises(openai.PermissionDeniedError) as caught:
        writer.batches.list()
    assert caught.value.code == "insufficient_scope"
    with pytest.raises(openai.PermissionDeniedError):
        writer.files.list()
    listing = cli(shared_stack, "keys", "list", "--project", project, "--json").stdout.splitlines()
    assert [json.loads(line)["scopes"] for line in listing] == [
        ["batches:read", "files:read"],
        ["files:write"],
    ]


def test_a_model_outside_the_policy_is_rejected_per_record(shared_stack: RunningStack) -> None:
    project = fresh_project(shared_stack, "models", "--allow-models", "gpt-4o-mini,gpt-4o")
    key_id = new_key(shared_stack, project, "--allow-models", "gpt-4o,claude-haiku-4-5")
    # The key narrows the project: gpt-4o only (claude is not the project's to give).
    records = chat_records(1, model="gpt-4o-mini", prefix="mini") + chat_records(
        2, model="gpt-4o", prefix="big"
    )
    client = shared_stack.client(project)
    batch = client.batches.create(
        input_file_id=upload(client, records).id, endpoint=ENDPOINT, completion_window="24h"
    )
    rejected = batch.model_extra["rejected_records"]
    assert [(r["line"], r["custom_id"], r["code"]) for r in rejected] == [(1, "mini-0", "model_not_allowed")]
    assert batch.request_counts.total == 3
    done = wait_for_batch(client, batch.id)
    assert (done.status, done.request_counts.completed) == ("completed", 2)

    with pytest.raises(openai.BadRequestError) as caught:
        client.batches.create(
            input_file_id=upload(client, chat_records(2, model="gpt-4o-mini", prefix="m")).id,
            endpoint=ENDPOINT,
            completion_window="24h",
        )
    body = caught.value.body
    assert caught.value.code == "no_valid_records"
    assert {r["code"] for r in body["rejected_records"]} == {"model_not_allowed"}
    assert "models=claude-haiku-4-5,gpt-4o" in cli(shared_stack, "keys", "list", "--project", project).stdout
    assert f"{key_id}\t" in cli(shared_stack, "keys", "list", "--project", project).stdout

    # A policy change reaches a key within auth_cache_s (servers cache a verified key).
    cli(shared_stack, "keys", "set-policy", key_id, "--allow-models", "all")
    time.sleep(shared_stack.settings.auth_cache_s + 0.5)
    ok = client.batches.create(
        input_file_id=upload(client, chat_records(1, model="gpt-4o-mini", prefix="again")).id,
        endpoint=ENDPOINT,
        completion_window="24h",
    )
    assert not ok.model_extra.get("rejected_records")


def test_record_limits_and_expedited_follow_the_narrower_policy(shared_stack: RunningStack) -> None:
    project = fresh_project(shared_stack, "limits", "--max-records", "3")
    new_key(shared_stack, project, "--max-records", "2", "--expedited", "no")
    four = upload_records(shared_stack, chat_records(4, prefix="four"), project)
    three = upload_records(shared_stack, chat_records(3, prefix="three"), project)
    two = upload_records(shared_stack, chat_records(2, prefix="two"), project)
    error = create_batch("sdk", shared_stack, from_file(three), project).expect_error(400, "input_too_large")
    assert "more than 2 records" in error["message"] and "API key or project" in error["message"]
    assert create_batch("sdk", shared_stack, from_file(two), project).status == 200
    error = create_batch(
        "http", shared_stack, {**from_file(two), "priority": "expedited"}, project
    ).expect_error(409, "feature_disabled")
    assert "xpedited" in error["message"]

    key_id = new_key(shared_stack, project)  # no policy of its own: the project's 3 hold
    assert create_batch("sdk", shared_stack, from_file(three), project).status == 200
    create_batch("sdk", shared_stack, from_file(four), project).expect_error(400, "input_too_large")
    assert (
        create_batch("http", shared_stack, {**from_file(two), "priority": "expedited"}, project).status == 200
    )
    cli(shared_stack, "projects", "set-policy", project, "--expedited", "no", "--max-records", "none")
    cli(shared_stack, "keys", "revoke", key_id, "--no-wait")  # the new policy reaches a fresh key at once
    new_key(shared_stack, project)
    create_batch("http", shared_stack, {**from_file(two), "priority": "expedited"}, project).expect_error(
        409, "feature_disabled"
    )
    assert create_batch("sdk", shared_stack, from_file(four), project).status == 200
    listed = cli(shared_stack, "projects", "list").stdout
    assert f"{project}\tno budget\tno-expedited" in listed


def test_open_batches_are_capped_per_project_and_per_key(shared_stack: RunningStack) -> None:
    project = fresh_project(shared_stack, "concurrent", "--max-concurrent", "2")
    new_key(shared_stack, project, "--max-concurrent", "1")
    slow = chat_records(2, prefix="slow", x_sim={"delay_ms": 4000})
    slow_file = upload_records(shared_stack, slow, project)
    first = create_batch("sdk", shared_stack, from_file(slow_file), project)
    assert first.status == 200
    error = create_batch("sdk", shared_stack, from_file(slow_file), project).expect_error(
        429, "too_many_open_batches"
    )
    assert "API key" in error["message"]
    new_key(shared_stack, project)  # the project allows one more
    assert create_batch("sdk", shared_stack, from_file(slow_file), project).status == 200
    create_batch("sdk", shared_stack, from_file(slow_file), project).expect_error(
        429, "too_many_open_batches"
    )
    wait_for_batch(shared_stack.client(project), first.body["id"], timeout_s=60)
    assert create_batch("sdk", shared_stack, from_file(slow_file), project).status == 200


def test_an_expiring_key_works_until_it_expires(shared_stack: RunningStack) -> None:
    project = fresh_project(shared_stack, "expiry")
    key_id = new_key(shared_stack, project, "--expires-in", "3s")
    client = shared_stack.client(project)
    assert client.batches.list().data == []
    assert "\texpires " in cli(shared_stack, "keys", "list", "--project", project).stdout
    time.sleep(3.5)
    with pytest.raises(openai.AuthenticationError):
        client.batches.list()
    assert "\texpired " in cli(shared_stack, "keys", "list", "--project", project).stdout
    cli(shared_stack, "keys", "set-policy", key_id, "--expires-in", "never")
    assert "\tno expiry\t" in cli(shared_stack, "keys", "list", "--project", project).stdout
