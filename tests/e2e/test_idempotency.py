"""Idempotency-Key on POST /v1/batches: one key, one batch, one run — per project, for a day.

"The same body" is the same parameters, whatever the key order or whitespace (README: API).
"""

from __future__ import annotations

import json
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from tests.e2e.ingest_client import VIAS, create_batch, from_file, upload_records
from tests.support import RunningStack, add_project, chat_records, db_rows, wait_for_batch

ENDPOINT = "/v1/chat/completions"
PROJECT = "idem"


@pytest.fixture(scope="module")
def project_id(shared_stack: RunningStack) -> str:
    return add_project(shared_stack, PROJECT)


def inline(prefix: str, n: int = 3, **extra: Any) -> dict[str, Any]:
    """An inline create whose messages are unique to `prefix` (the simulator counts runs by content)."""
    requests = [
        {
            "custom_id": f"r{i}",
            "body": {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": f"{prefix}-{i}"}]},
        }
        for i in range(n)
    ]
    return {"endpoint": ENDPOINT, "completion_window": "24h", "requests": requests, **extra}


def key_header() -> dict[str, str]:
    return {"Idempotency-Key": f"key-{uuid.uuid4()}"}


def batches_of(stack: RunningStack, project_id: str) -> int:
    return int(
        db_rows(stack.database_url, "SELECT count(*) FROM batches WHERE project_id = :p", p=project_id)[0][0]
    )


@pytest.mark.parametrize("via", VIAS)
def test_a_repeat_answers_the_first_batch_and_runs_nothing_twice(
    shared_stack: RunningStack, project_id: str, via: str
) -> None:
    prefix = f"idem-repeat-{via}-{uuid.uuid4().hex[:8]}"
    body = inline(prefix, metadata={"try": "1"})
    body["requests"].append({"custom_id": "bad", "body": {"model": "gpt-9"}})
    headers = key_header()
    first = create_batch(via, shared_stack, body, PROJECT, headers)
    assert first.status == 200, first.body
    assert "idempotent-replayed" not in first.headers
    count = batches_of(shared_stack, project_id)

    again = create_batch(via, shared_stack, body, PROJECT, headers)
    assert again.status == 200, again.body
    assert again.headers["idempotent-replayed"] == "true"
    assert again.body["id"] == first.body["id"]
    assert [r["code"] for r in again.body["rejected_records"]] == ["model_not_found"]
    assert batches_of(shared_stack, project_id) == count

    wait_for_batch(shared_stack.client(PROJECT), first.body["id"])
    late = create_batch(via, shared_stack, body, PROJECT, headers)  # after the end: still the same batch
    assert (late.body["id"], late.body["status"]) == (first.body["id"], "completed")
    runs = shared_stack.simulator_stats()["by_content"]
    assert [runs.get(f"{prefix}-{i}") for i in range(3)] == [1, 1, 1]


@pytest.mark.parametrize("via", VIAS)
def test_the_same_key_with_another_body_is_422(shared_stack: RunningStack, project_id: str, via: str) -> None:
    headers = key_header()
    first = create_batch(via, shared_stack, inline("idem-422"), PROJECT, headers)
    assert first.status == 200
    count = batches_of(shared_stack, project_id)
    other = create_batch(via, shared_stack, inline("idem-422", metadata={"changed": "yes"}), PROJECT, headers)
    other.expect_error(422, "idempotency_key_reused")
    assert batches_of(shared_stack, project_id) == count


def test_key_order_and_whitespace_do_not_make_another_request(shared_stack: RunningStack) -> None:
    """The same parameters in another order and layout replay; `1.0` for `1` in a record does
    not (records are stored and sent upstream as given)."""
    headers = {"Authorization": f"Bearer {shared_stack.keys[PROJECT]}", "Content-Type": "application/json"}
    headers |= key_header()
    body = inline(f"idem-layout-{uuid.uuid4().hex[:8]}", metadata={"a": "1", "b": "2"})
    body["requests"][0]["body"]["max_tokens"] = 1
    url = f"{shared_stack.base_url}/batches"
    first = httpx.post(url, content=json.dumps(body), headers=headers, timeout=60)
    assert first.status_code == 200, first.text
    reordered = {k: body[k] for k in reversed(body)}
    reordered["metadata"] = {"b": "2", "a": "1"}
    again = httpx.post(url, content=json.dumps(reordered, indent=2), headers=headers, timeout=60)
    assert (again.status_code, again.json()["id"]) == (200, first.json()["id"])
    assert again.headers["idempotent-replayed"] == "true"
    body["requests"][0]["body"]["max_tokens"] = 1.0
    other = httpx.post(url, content=json.dumps(body), headers=headers, timeout=60)
    assert (other.status_code, other.json()["error"]["code"]) == (422, "idempotency_key_reused")


def test_keys_belong_to_a_project(shared_stack: RunningStack, project_id: str) -> None:
    headers = key_header()
    mine = create_batch("http", shared_stack, inline("idem-projects"), PROJECT, headers)
    theirs = create_batch("http", shared_stack, inline("idem-projects"), "other", headers)
    assert mine.status == theirs.status == 200
    assert mine.body["id"] != theirs.body["id"]


def test_concurrent_creates_with_one_key_make_one_batch(shared_stack: RunningStack, project_id: str) -> None:
    # Big enough that the first create is still checking records when the others arrive.
    input_file = upload_records(
        shared_stack, chat_records(3000, prefix=f"idem-race-{uuid.uuid4().hex[:6]}"), PROJECT
    )
    body = from_file(input_file)
    headers = key_header()
    before = batches_of(shared_stack, project_id)
    with ThreadPoolExecutor(4) as pool:
        answers = list(
            pool.map(lambda via: create_batch(via, shared_stack, body, PROJECT, headers), VIAS * 2)
        )
    assert [a.status for a in answers] == [200] * 4, [a.body for a in answers]
    assert len({a.body["id"] for a in answers}) == 1
    assert sum(a.headers.get("idempotent-replayed") == "true" for a in answers) == 3
    assert batches_of(shared_stack, project_id) == before + 1
    rows = db_rows(
        shared_stack.database_url, "SELECT count(*) FROM batches WHERE input_file_id = :f", f=input_file
    )
    assert rows[0][0] == 1


@pytest.mark.parametrize("via", VIAS)
def test_a_failed_create_does_not_poison_the_key(
    shared_stack: RunningStack, project_id: str, via: str
) -> None:
    headers = key_header()
    bad = {"endpoint": ENDPOINT, "completion_window": "24h", "requests": [{"body": {"model": "gpt-9"}}]}
    create_batch(via, shared_stack, bad, PROJECT, headers).expect_error(400, "no_valid_records")
    create_batch(via, shared_stack, bad, PROJECT, headers).expect_error(400, "no_valid_records")  # not 422
    good = create_batch(via, shared_stack, inline("idem-unpoisoned"), PROJECT, headers)
    assert good.status == 200, good.body
    keys = db_rows(
        shared_stack.database_url,
        "SELECT batch_id FROM idempotency_keys WHERE project_id = :p AND key = :k",
        p=project_id,
        k=headers["Idempotency-Key"],
    )
    assert [k.batch_id for k in keys] == [good.body["id"]]


def test_a_key_lapses_after_a_day(shared_stack: RunningStack, project_id: str) -> None:
    headers = key_header()
    first = create_batch("http", shared_stack, inline("idem-lapse"), PROJECT, headers)
    db_rows(
        shared_stack.database_url,
        "UPDATE idempotency_keys SET created_at = created_at - 86401 WHERE project_id = :p AND key = :k",
        p=project_id,
        k=headers["Idempotency-Key"],
    )
    later = create_batch("http", shared_stack, inline("idem-lapse"), PROJECT, headers)
    assert later.status == 200
    assert later.body["id"] != first.body["id"]
    assert "idempotent-replayed" not in later.headers
