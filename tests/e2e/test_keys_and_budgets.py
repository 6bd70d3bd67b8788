"""API keys and budgets as an operator manages them: `batchgate keys …` / `batchgate projects …`.

A revoked key is refused (401) as soon as `keys revoke` returns; a key or project whose
budget is used up gets 402 on create, and nothing is stored.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid

import openai
import pytest

from tests.e2e.ingest_client import VIAS, Answer, create_batch, from_file, upload_records
from tests.support import RunningStack, chat_records, db_rows, run_cli, wait_for_batch

ENDPOINT = "/v1/chat/completions"


def cli(stack: RunningStack, *args: str) -> subprocess.CompletedProcess[str]:
    """Run `batchgate` against the stack's database, as an operator would."""
    done = run_cli(*args, env=stack.env)
    assert done.returncode == 0, done.stderr
    return done


def new_key(stack: RunningStack, project: str, *extra: str) -> str:
    """The id of a key made with `batchgate keys create` (usable as stack.client(project))."""
    made = cli(stack, "keys", "create", "--project", project, "--name", "budget-test", *extra)
    stack.keys[project] = made.stdout.strip()
    return made.stderr.split()[1]  # "key <id> for project …"


def footprint(stack: RunningStack, project: str) -> tuple[int, int]:
    row = db_rows(
        stack.database_url,
        """
        SELECT (SELECT count(*) FROM batches b JOIN projects p ON p.id = b.project_id WHERE p.name = :n),
               (SELECT count(*) FROM files f JOIN projects p ON p.id = f.project_id WHERE p.name = :n)
        """,
        n=project,
    )[0]
    return int(row[0]), int(row[1])


def create(stack: RunningStack, project: str, input_file: str, via: str = "sdk") -> Answer:
    return create_batch(via, stack, from_file(input_file), project)


def test_a_revoked_key_is_refused_once_revoke_returns(shared_stack: RunningStack) -> None:
    project = f"revoke-{uuid.uuid4().hex[:6]}"
    key_id = new_key(shared_stack, project)
    client = shared_stack.client(project)
    assert client.batches.list().data == []  # verified, and now cached by the server
    listing = cli(shared_stack, "keys", "list", "--project", project).stdout
    assert f"{key_id}\t" in listing and "\tactive\t" in listing

    cli(shared_stack, "keys", "revoke", key_id)
    with pytest.raises(openai.AuthenticationError) as caught:
        client.batches.list()
    assert caught.value.status_code == 401 and caught.value.code == "invalid_api_key"
    with pytest.raises(openai.AuthenticationError):
        client.files.create(file=("x.jsonl", b"{}\n"), purpose="batch")
    assert "\trevoked\t" in cli(shared_stack, "keys", "list", "--project", project).stdout


def test_a_key_past_its_expiry_lists_as_expired(shared_stack: RunningStack) -> None:
    project = f"expired-{uuid.uuid4().hex[:6]}"
    key_id = new_key(shared_stack, project, "--expires-in", "1s")
    time.sleep(1.2)
    with pytest.raises(openai.AuthenticationError):
        shared_stack.client(project).batches.list()
    listing = cli(shared_stack, "keys", "list", "--project", project).stdout
    assert f"{key_id}\t" in listing and "\texpired\t" in listing and "\tactive\t" not in listing
    listed = json.loads(cli(shared_stack, "keys", "list", "--project", project, "--json").stdout)
    assert listed["state"] == "expired"


def spend(stack: RunningStack, project: str, key_id: str, input_file: str) -> float:
    """Run one batch of `input_file` to its end with the key: what the key has spent since."""
    first = create(stack, project, input_file)
    assert first.status == 200
    wait_for_batch(stack.client(project), first.body["id"])
    return float(
        db_rows(stack.database_url, "SELECT sum(cost_usd) FROM usage_events WHERE api_key_id = :k", k=key_id)[
            0
        ][0]
    )


def test_a_used_up_key_budget_is_402_and_stores_nothing(shared_stack: RunningStack) -> None:
    project = f"keybudget-{uuid.uuid4().hex[:6]}"
    key_id = new_key(shared_stack, project, "--budget", "100")
    input_file = upload_records(shared_stack, chat_records(3, prefix=f"spend-{project}"), project)
    spent = spend(shared_stack, project, key_id, input_file)
    assert spent > 0

    cli(shared_stack, "keys", "set-budget", key_id, repr(spent / 2))
    before = footprint(shared_stack, project)
    for via in VIAS:
        error = create(shared_stack, project, input_file, via).expect_error(402, "key_budget_exceeded")
        assert error["type"] == "billing_error"
    assert footprint(shared_stack, project) == before

    # Under budget again, but the batch's worst-case cost (its hold) must fit in what is left.
    cli(shared_stack, "keys", "set-budget", key_id, repr(spent * 1.5))
    refused = create(shared_stack, project, input_file).expect_error(402, "key_budget_exceeded")
    assert refused["hold_usd"] > refused["remaining_usd"] > 0
    cli(shared_stack, "keys", "set-budget", key_id, repr(spent + refused["hold_usd"] * 1.01))
    assert create(shared_stack, project, input_file).status == 200
    cli(shared_stack, "keys", "set-budget", key_id, "none")
    assert create(shared_stack, project, input_file).status == 200


def test_a_used_up_project_budget_is_402_for_every_key(shared_stack: RunningStack) -> None:
    project = f"projbudget-{uuid.uuid4().hex[:6]}"
    cli(shared_stack, "projects", "create", project, "--budget", "0")  # nothing may be spent
    new_key(shared_stack, project)
    assert f"{project}\tbudget $0" in cli(shared_stack, "projects", "list").stdout
    input_file = upload_records(shared_stack, chat_records(1, prefix=project), project)
    before = footprint(shared_stack, project)
    with pytest.raises(openai.APIStatusError) as caught:
        shared_stack.client(project).batches.create(
            input_file_id=input_file, endpoint=ENDPOINT, completion_window="24h"
        )
    assert (caught.value.status_code, caught.value.code) == (402, "project_budget_exceeded")
    assert footprint(shared_stack, project) == before

    cli(shared_stack, "projects", "set-budget", project, "none")
    assert create(shared_stack, project, input_file).status == 200


def test_a_budget_refusal_shows_small_amounts_to_the_micro_dollar(shared_stack: RunningStack) -> None:
    """A budget of a fraction of a cent is not shown as $0.0000: both amounts at six decimals."""
    project = f"tinybudget-{uuid.uuid4().hex[:6]}"
    key_id = new_key(shared_stack, project, "--budget", "100")
    input_file = upload_records(shared_stack, chat_records(1, prefix=f"tiny-{project}"), project)
    spent = spend(shared_stack, project, key_id, input_file)
    assert 0.000001 < spent < 0.00005  # shown as $0.0000 at four decimals
    cli(shared_stack, "keys", "set-budget", key_id, "0.000001")
    error = create(shared_stack, project, input_file, "http").expect_error(402, "key_budget_exceeded")
    assert error["message"] == f"This API key has spent ${spent:.6f} of its $0.000001 budget."
