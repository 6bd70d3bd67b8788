"""Budget holds through the `openai` SDK (README "Budget holds"): a create holds its batch's
worst-case cost against what its key and project have left; 402 names the hold and the
remainder; an open batch's hold counts as spent; once the batch ends only its real cost counts;
two creates at once never both pass on the same remainder."""

from __future__ import annotations

import json
import re
import threading
import uuid
from pathlib import Path
from typing import Any

import openai
import pytest

from batchgate.exit_codes import ExitCode
from tests.e2e.ingest_client import Answer, create_batch, from_file, upload_records
from tests.e2e.test_keys_and_budgets import cli, new_key
from tests.execution_support import private_stack
from tests.support import RunningStack, chat_records, db_rows, jsonl, run_cli, wait_for_batch

MAX_TOKENS = 2000
# gpt-4o-mini on the simulator: $0.60 per million output tokens, 50% batch discount.
OUTPUT_HOLD_PER_RECORD = MAX_TOKENS * 0.6 / 1_000_000 * 0.5


def slow_records(n: int, prefix: str) -> list[dict[str, Any]]:
    return chat_records(n, prefix=prefix, max_tokens=MAX_TOKENS, x_sim={"delay_ms": 3000})


def hold_of(stack: RunningStack, project: str, key_id: str, input_file: str) -> float:
    """The hold a create of `input_file` asks for, read from the 402 of a tiny budget."""
    cli(stack, "keys", "set-budget", key_id, "0.000000001")
    error = create_batch("sdk", stack, from_file(input_file), project).expect_error(
        402, "key_budget_exceeded"
    )
    assert error["type"] == "billing_error" and error["remaining_usd"] == 0
    return float(error["hold_usd"])


def test_a_hold_that_does_not_fit_is_402_naming_it_and_the_remainder(shared_stack: RunningStack) -> None:
    project = f"hold-{uuid.uuid4().hex[:6]}"
    key_id = new_key(shared_stack, project)
    input_file = upload_records(shared_stack, slow_records(4, project), project)
    hold = hold_of(shared_stack, project, key_id, input_file)
    # Output allowance of every record at the discounted price, plus a little estimated input.
    assert 4 * OUTPUT_HOLD_PER_RECORD < hold < 4 * OUTPUT_HOLD_PER_RECORD * 1.01
    before = db_rows(
        shared_stack.database_url, "SELECT count(*) FROM batches WHERE api_key_id = :k", k=key_id
    )

    cli(shared_stack, "keys", "set-budget", key_id, repr(hold * 1.5))
    first = create_batch("sdk", shared_stack, from_file(input_file), project)
    assert first.status == 200
    # The first batch is running: its hold counts as spent, so the same batch does not fit again.
    second = create_batch("http", shared_stack, from_file(input_file), project)
    error = second.expect_error(402, "key_budget_exceeded")
    assert error["hold_usd"] == pytest.approx(hold, rel=1e-6)
    assert error["remaining_usd"] == pytest.approx(hold * 0.5, rel=1e-3)
    assert f"${hold:.6f}" in error["message"]
    assert f"left of its ${hold * 1.5:.6f} budget" in error["message"]  # one precision for every amount
    after = db_rows(shared_stack.database_url, "SELECT count(*) FROM batches WHERE api_key_id = :k", k=key_id)
    assert after[0][0] == before[0][0] + 1  # the refused create left nothing

    # Settled: the hold is released and only the real (much smaller) cost stays spent.
    client = shared_stack.client(project)
    done = wait_for_batch(client, first.body["id"], timeout_s=60)
    assert done.status == "completed"
    spent = db_rows(
        shared_stack.database_url, "SELECT sum(cost_usd) FROM usage_events WHERE api_key_id = :k", k=key_id
    )[0][0]
    assert 0 < spent < hold / 10
    assert create_batch("sdk", shared_stack, from_file(input_file), project).status == 200


def test_the_project_budget_holds_across_its_keys(shared_stack: RunningStack) -> None:
    project = f"phold-{uuid.uuid4().hex[:6]}"
    key_id = new_key(shared_stack, project)
    input_file = upload_records(shared_stack, slow_records(2, project), project)
    hold = hold_of(shared_stack, project, key_id, input_file)
    cli(shared_stack, "keys", "set-budget", key_id, "none")
    cli(shared_stack, "projects", "set-budget", project, repr(hold * 1.9))
    assert create_batch("sdk", shared_stack, from_file(input_file), project).status == 200
    new_key(shared_stack, project)  # another key of the same project
    other_file = upload_records(shared_stack, slow_records(2, project + "b"), project)
    with pytest.raises(openai.APIStatusError) as caught:
        shared_stack.client(project).batches.create(
            input_file_id=other_file, endpoint="/v1/chat/completions", completion_window="24h"
        )
    assert (caught.value.status_code, caught.value.code) == (402, "project_budget_exceeded")
    assert caught.value.body["remaining_usd"] == pytest.approx(hold * 0.9, rel=1e-3)


def test_concurrent_creates_never_both_pass_on_one_remainder(db_kind: str, tmp_path: Path) -> None:
    """Each create pauses a second between reading the remainder and holding its share
    (`pause:` fault point): without the row lock, every one of them would pass."""
    with private_stack(db_kind, tmp_path, BATCHGATE_CRASH_AT="pause:ingest.create.hold_checked") as stack:
        project = "default"
        key_id = new_key(stack, project)
        records = chat_records(3, prefix="race", max_tokens=MAX_TOKENS, x_sim={"delay_ms": 15_000})
        input_file = upload_records(stack, records, project)
        hold = hold_of(stack, project, key_id, input_file)
        cli(stack, "keys", "set-budget", key_id, repr(hold * 2.5))  # room for two holds, not three
        attempts = 4
        answers: list[Answer] = []
        start = threading.Barrier(attempts)

        def create() -> None:
            start.wait()
            answers.append(create_batch("http", stack, from_file(input_file), project))

        threads = [threading.Thread(target=create) for _ in range(attempts)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        assert sorted(a.status for a in answers) == [200, 200] + [402] * (attempts - 2)
        assert {a.error["code"] for a in answers if a.status == 402} == {"key_budget_exceeded"}
        held = db_rows(
            stack.database_url,
            "SELECT count(*), sum(hold_usd) FROM batches WHERE api_key_id = :k AND status <> 'validating'",
            k=key_id,
        )[0]
        assert held[0] == 2 and held[1] == pytest.approx(hold * 2, rel=1e-3)


def test_the_responses_instructions_are_held(shared_stack: RunningStack) -> None:
    """The hold counted `input` but not `instructions`: a long system prompt held $0.000001
    and a key went past its budget, create after create."""
    project = f"ihold-{uuid.uuid4().hex[:6]}"
    key_id = new_key(shared_stack, project)
    body = {
        "model": "gpt-4o-mini",
        "instructions": "hello world " * 2500,
        "input": "hi",
        "max_output_tokens": 1,
    }
    record = {"custom_id": "long-instructions", "method": "POST", "url": "/v1/responses", "body": body}
    params = {
        "input_file_id": upload_records(shared_stack, [record], project),
        "endpoint": "/v1/responses",
        "completion_window": "24h",
    }
    cli(shared_stack, "keys", "set-budget", key_id, "0.0002")
    dry = create_batch("http", shared_stack, {**params, "dry_run": True}, project)
    assert dry.status == 200, dry.body
    estimate = dry.body["estimate"]
    assert estimate["hold_usd"] >= estimate["cost_min"] > 0.0002  # 30,000 bytes of input
    assert estimate["hold_verdict"] == "key_budget_exceeded"
    create_batch("sdk", shared_stack, params, project).expect_error(402, "key_budget_exceeded")


@pytest.mark.parametrize("refusal", ["key_budget_exceeded", "too_many_open_batches"])
def test_the_cli_dry_run_fails_as_the_create_it_previews_would(
    shared_stack: RunningStack, tmp_path: Path, refusal: str
) -> None:
    """The dry run printed its estimate and exited 0 while its answer's `hold_verdict` said the
    create would get 402 or 429: a script checking the exit code went on to a failing create."""
    project = f"clihold-{uuid.uuid4().hex[:6]}"
    key_id = new_key(shared_stack, project, "--max-concurrent", "1")
    path = tmp_path / "input.jsonl"
    path.write_bytes(jsonl(slow_records(2, project)))
    env = {"BATCHGATE_BASE_URL": shared_stack.base_url, "BATCHGATE_API_KEY": shared_stack.keys[project]}
    create = ("batches", "create", "--input-file", str(path), "--endpoint", "/v1/chat/completions")
    fits = run_cli(*create, "--dry-run", env=env)
    assert fits.returncode == ExitCode.OK, fits.stderr
    assert re.search(r"budget hold +0\.\d{6} usd \(fits\)", fits.stdout), fits.stdout

    if refusal == "key_budget_exceeded":
        cli(shared_stack, "keys", "set-budget", key_id, "0.000000001")
    else:  # the key's one open batch: 20 s per record on the simulator
        records = chat_records(2, prefix=f"{project}-open", x_sim={"delay_ms": 20_000})
        opened = create_batch(
            "sdk", shared_stack, from_file(upload_records(shared_stack, records, project)), project
        )
        assert opened.status == 200, opened.body
    table = run_cli(*create, "--dry-run", env=env)
    as_json = run_cli(*create, "--dry-run", "--json", env=env)
    real = run_cli(*create, env=env)
    if refusal == "too_many_open_batches":
        shared_stack.client(project).batches.cancel(opened.body["id"])

    assert table.returncode == ExitCode.OTHER, (table.stdout, table.stderr)
    assert "DRY RUN" in table.stdout and f"usd ({refusal})" in table.stdout
    estimate = json.loads(as_json.stdout)["estimate"]  # the API's answer, unchanged
    assert as_json.returncode == ExitCode.OTHER and estimate["hold_verdict"] == refusal
    refused = f"error: a create would be refused ({refusal}): {estimate['hold_message']}"
    assert estimate["hold_message"] and refused in table.stderr.splitlines(), table.stderr
    assert refused in as_json.stderr.splitlines(), as_json.stderr
    assert real.returncode == table.returncode and refusal in real.stderr  # what the dry run foretold


@pytest.mark.parametrize(
    ("endpoint", "records", "tokens", "per_mtok"),
    [
        # 10 records of 8,000 token ids at $0.02 per million input tokens
        (
            "/v1/embeddings",
            [{"model": "text-embedding-3-small", "input": [15339 + n] * 8000} for n in range(10)],
            10 * 8000,
            0.02,
        ),
        # 5 records of 4 prompts × n 2 answers of 100 tokens at $0.60 per million output tokens
        (
            "/v1/completions",
            [
                {"model": "gpt-4o-mini", "prompt": ["a", "b", "c", "d"], "n": 2, "max_tokens": 100}
                for _ in range(5)
            ],
            5 * 4 * 2 * 100,
            0.6,
        ),
    ],
    ids=["token ids", "prompts and n"],
)
def test_token_ids_and_every_answer_are_held(
    shared_stack: RunningStack, endpoint: str, records: list[dict[str, Any]], tokens: int, per_mtok: float
) -> None:
    """A token id counted as no input and `n` or a list of prompts as one answer: a key with a
    budget of $0.00005 spent $0.004 (80 times it) on embeddings of token ids."""
    project = f"ids-{uuid.uuid4().hex[:6]}"
    key_id = new_key(shared_stack, project)
    lines = [
        {"custom_id": f"r{n}", "method": "POST", "url": endpoint, "body": body}
        for n, body in enumerate(records)
    ]
    input_file = upload_records(shared_stack, lines, project)
    cli(shared_stack, "keys", "set-budget", key_id, "0.000000001")
    body = {**from_file(input_file), "endpoint": endpoint}
    error = create_batch("sdk", shared_stack, body, project).expect_error(402, "key_budget_exceeded")
    assert error["hold_usd"] >= tokens * per_mtok / 1_000_000 * 0.5  # the batch discount
