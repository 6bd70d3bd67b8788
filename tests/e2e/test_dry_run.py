"""`"dry_run": true`: every check a create makes, an estimate from OpenAI's tokenizer, and
nothing stored or counted."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import bpe_openai
import httpx
import openai
import pytest
from sqlalchemy import func, select

from batchgate.services.common.db.schema import batches, blobs, files, idempotency_keys, items, usage_events
from tests.support import (
    RunningStack,
    add_project,
    chat_records,
    db_rows,
    fresh_database,
    jsonl,
    run_cli,
    running_stack,
    upload,
)

TABLES = (batches, items, files, blobs, idempotency_keys, usage_events)


@pytest.fixture(scope="module")
def quiet_stack(db_kind: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    """A stack of this module's own: the row counts below see whole tables, and on the shared
    stack an earlier test's batch finishing meanwhile adds rows to them."""
    tmp: Path = tmp_path_factory.mktemp(f"dry-run-{db_kind}")
    with fresh_database(db_kind, tmp) as url, running_stack(tmp, url, projects=("default", "other")) as stack:
        yield stack


def stored(stack: RunningStack) -> dict[str, int]:
    return {t.name: db_rows(stack.database_url, select(func.count()).select_from(t))[0][0] for t in TABLES}


def cookbook_tokens(messages: list[dict[str, Any]]) -> int:
    """OpenAI's cookbook count of chat prompt tokens, with o200k_base (gpt-4o's tokenizer)."""
    encoding = bpe_openai.get_encoding("o200k_base")
    total = 3
    for message in messages:
        total += 3 + sum(len(encoding.encode_ordinary(v)) for v in message.values())
    return total


def dry_run(stack: RunningStack, records: list[dict[str, Any]], endpoint: str) -> Any:
    """The dry run of a create from an upload of `records` (the SDK's batch, with its extras)."""
    client = stack.client()
    return client.batches.create(
        input_file_id=upload(client, records).id,
        endpoint=endpoint,
        completion_window="24h",
        extra_body={"dry_run": True},
    )


def test_dry_run_estimates_with_the_real_tokenizer_and_stores_nothing(quiet_stack: RunningStack) -> None:
    client = quiet_stack.client()
    records = chat_records(4, prefix=f"dry-{time.time_ns()}", max_completion_tokens=50)
    del records[2]["body"]["max_completion_tokens"]  # → the provider's default_max_tokens
    records.append({"custom_id": "broken", "method": "POST"})  # rejected alone
    source = upload(client, records)
    before = stored(quiet_stack)

    batch = client.batches.create(
        input_file_id=source.id,
        endpoint="/v1/chat/completions",
        completion_window="24h",
        metadata={"team": "dry"},
        extra_body={"dry_run": True},
        extra_headers={"Idempotency-Key": f"dry-{time.time_ns()}"},
    )
    assert stored(quiet_stack) == before  # no batch, item, file, blob, key or usage row

    extra = batch.model_extra
    assert extra["dry_run"] is True and batch.id == "" and batch.status == "validating"
    assert batch.request_counts.total == 5 and extra["rejected_count"] == 1
    assert extra["rejected_records"][0]["custom_id"] == "broken" and extra["rejected_records_file_id"] is None
    assert batch.model == "gpt-4o-mini" and batch.metadata == {"team": "dry"}
    estimate = extra["estimate"]
    expected_input = sum(cookbook_tokens(r["body"]["messages"]) for r in records[:4])
    assert estimate["tokenizer"] == "o200k_base" and estimate["input_tokens"] == expected_input
    assert estimate["max_output_tokens"] == 3 * 50 + 4096
    net = (1 - quiet_stack.settings.batch_discount(0)) / 1e6
    assert estimate["cost_min"] == pytest.approx(expected_input * 0.15 * net)
    assert estimate["cost_max"] == pytest.approx((expected_input * 0.15 + (150 + 4096) * 0.6) * net)
    assert estimate["currency"] == "usd"
    assert all(b.id for b in client.batches.list(limit=5).data)  # nothing new is listed


def test_dry_run_refuses_what_a_create_refuses_and_stores_nothing(quiet_stack: RunningStack) -> None:
    client = quiet_stack.client()
    before = stored(quiet_stack)
    with pytest.raises(openai.BadRequestError) as caught:
        client.post(
            "/batches",
            body={
                "model": "gpt-4o-mini",
                "dry_run": True,
                "requests": [{"messages": "x", "model": "gpt-4o"}] * 30,
            },
            cast_to=openai.types.Batch,
        )
    assert caught.value.code == "no_valid_records"
    assert caught.value.body["rejected_records"][0]["code"] == "model_mismatch"
    # Every rejection counted; the first few listed (a create's file would have every one).
    assert caught.value.body["rejected_count"] == 30
    assert len(caught.value.body["rejected_records"]) == quiet_stack.settings.rejected_preview_max < 30
    with pytest.raises(openai.BadRequestError) as caught:
        client.post("/batches", body={"model": "nope", "dry_run": True, "requests": [{}]}, cast_to=dict)
    assert caught.value.code == "model_not_found"
    project = f"dry-broke-{time.time_ns()}"
    add_project(quiet_stack, project, budget_usd=0.0)
    broke = quiet_stack.client(project)
    with pytest.raises(openai.APIStatusError) as spent:
        broke.post(
            "/batches",
            body={"model": "gpt-4o-mini", "dry_run": True, "requests": [{"messages": []}]},
            cast_to=dict,
        )
    assert spent.value.status_code == 402
    assert stored(quiet_stack) == before


def test_an_embeddings_dry_run_counts_with_cl100k(quiet_stack: RunningStack) -> None:
    """text-embedding-3-small (and gpt-4, gpt-3.5-turbo) use cl100k_base, which the tokenizer
    library's `encoding_for_model` refused with a bare ValueError: the dry run answered 500."""
    texts = ["The quick brown fox.", "Jumps over the lazy dog, twice."]
    records = [
        {
            "custom_id": f"emb-{i}",
            "method": "POST",
            "url": "/v1/embeddings",
            "body": {"model": "text-embedding-3-small", "input": text},
        }
        for i, text in enumerate(texts)
    ]
    estimate = dry_run(quiet_stack, records, "/v1/embeddings").model_extra["estimate"]
    encoding = bpe_openai.get_encoding("cl100k_base")
    assert estimate["tokenizer"] == "cl100k_base"
    assert estimate["input_tokens"] == sum(len(encoding.encode_ordinary(t)) for t in texts)
    assert estimate["max_output_tokens"] == 0


def test_only_a_positive_integer_limits_the_output_as_in_the_budget_hold(quiet_stack: RunningStack) -> None:
    """`true` is an int to Python: the estimate read it as a 1-token limit while the hold it
    reports (and the create's) took the provider's default."""
    answer = httpx.post(
        f"{quiet_stack.base_url}/batches",
        json={
            "model": "gpt-4o-mini",
            "dry_run": True,
            "requests": [
                {"messages": [{"role": "user", "content": "hi"}], "max_tokens": limit}
                for limit in (True, 0, -5, 5.5, "9")
            ],
        },
        headers={"Authorization": f"Bearer {quiet_stack.keys['default']}"},
        timeout=60,
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["estimate"]["max_output_tokens"] == 5 * 4096


def test_models_without_an_offline_tokenizer_get_the_documented_approximation(
    quiet_stack: RunningStack,
) -> None:
    text = "Bonjour, ceci est un test d'estimation."
    answer = httpx.post(
        f"{quiet_stack.base_url}/batches",
        json={
            "model": "claude-haiku-4-5",
            "dry_run": True,
            "requests": [{"messages": [{"role": "user", "content": text}], "max_tokens": 10}],
        },
        headers={"Authorization": f"Bearer {quiet_stack.keys['default']}"},
        timeout=60,
    )
    assert answer.status_code == 200, answer.text
    estimate = answer.json()["estimate"]
    assert estimate["tokenizer"] == "approximate"
    assert estimate["input_tokens"] == 3 + 3 + math.ceil(4 / 4) + math.ceil(len(text.encode()) / 4)
    assert estimate["max_output_tokens"] == 10


def test_cli_dry_run_prints_a_summary_and_creates_nothing(quiet_stack: RunningStack, tmp_path: Any) -> None:
    path = tmp_path / "input.jsonl"
    path.write_bytes(jsonl(chat_records(3, prefix=f"dry-cli-{time.time_ns()}")))
    before = stored(quiet_stack)
    env = {"BATCHGATE_BASE_URL": quiet_stack.base_url, "BATCHGATE_API_KEY": quiet_stack.keys["default"]}
    answer = run_cli(
        "batches",
        "create",
        "--input-file",
        str(path),
        "--endpoint",
        "/v1/chat/completions",
        "--dry-run",
        env=env,
    )
    assert answer.returncode == 0, answer.stderr
    assert "input tokens" in answer.stdout and "o200k_base" in answer.stdout and "usd" in answer.stdout
    assert "records" in answer.stdout and "3 (0 rejected)" in answer.stdout
    assert stored(quiet_stack) == before  # not even the upload


@pytest.mark.parametrize("size", [1_000_000, 10 * 1024 * 1024 - 1024])
def test_a_text_too_long_for_the_tokenizer_whole_is_estimated(quiet_stack: RunningStack, size: int) -> None:
    """The tokenizer refuses a text of a million characters: the dry run answered 500 where the
    create accepts the record (it is within `max_record_bytes`)."""
    text = ("hello world " * (size // 12 + 1))[:size]
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": text}], "max_tokens": 1}
    records = [{"custom_id": "long", "method": "POST", "url": "/v1/chat/completions", "body": body}]
    estimate = dry_run(quiet_stack, records, "/v1/chat/completions").model_extra["estimate"]
    words = size // 12 * 2  # "hello", " world": a token each (the cuts fall before a space)
    assert estimate["tokenizer"] == "o200k_base" and words < estimate["input_tokens"] < words + 20
    assert estimate["hold_verdict"] == "fits" and estimate["hold_usd"] > estimate["cost_min"] > 0


def test_an_input_of_blank_lines_is_an_empty_file_as_for_a_create(quiet_stack: RunningStack) -> None:
    client = quiet_stack.client()
    source = upload(client, b"\n\n  \n")
    for extra in ({"dry_run": True}, {}):
        with pytest.raises(openai.BadRequestError) as caught:
            client.batches.create(
                input_file_id=source.id,
                endpoint="/v1/chat/completions",
                completion_window="24h",
                extra_body=extra,
            )
        assert (caught.value.code, caught.value.body["param"]) == ("empty_file", "input_file_id")


def test_a_dry_run_refuses_tool_urls_and_workflows_as_a_create_does(quiet_stack: RunningStack) -> None:
    """The create's record checks after the checker's own: a tool server on a private address is
    a per-record rejection, and a workflow where the project has workflows off is 409."""
    client = quiet_stack.client()
    records = chat_records(2, prefix=f"dry-urls-{time.time_ns()}")
    records[1]["body"]["tools"] = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    records[1]["body"]["batchgate"] = {"tool_config": {"url": "http://169.254.169.254/latest"}}
    before = stored(quiet_stack)
    answer = dry_run(quiet_stack, records, "/v1/chat/completions")
    [rejected] = answer.model_extra["rejected_records"]
    assert (rejected["line"], rejected["code"]) == (2, "invalid_tool_config")
    assert "169.254.169.254" in rejected["message"]

    workflow = chat_records(1, prefix=f"dry-workflow-{time.time_ns()}")
    workflow[0]["body"]["batchgate"] = {"workflow": {"url": "https://callback.example/steps"}}
    with pytest.raises(openai.ConflictError) as caught:
        client.post(
            "/batches",
            body={
                "endpoint": "/v1/chat/completions",
                "completion_window": "24h",
                "dry_run": True,
                "requests": workflow,
            },
            cast_to=dict,
        )
    assert caught.value.code == "feature_disabled"
    assert stored(quiet_stack) == {**before, "files": before["files"] + 1, "blobs": before["blobs"] + 1}
