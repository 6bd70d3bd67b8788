"""A create killed mid-way (kill -9 before it publishes) leaves nothing behind once the core
is back: no batch, item, blob or Idempotency-Key claim, so the client's retry runs cleanly."""

from __future__ import annotations

import time
from pathlib import Path

import httpx

from tests.support import (
    RunningStack,
    chat_records,
    db_rows,
    fresh_database,
    running_stack,
    upload,
    wait_for_batch,
)

ENDPOINT = "/v1/chat/completions"
LEFTOVERS = """
    SELECT (SELECT count(*) FROM batches) AS batches,
           (SELECT count(*) FROM items) AS items,
           (SELECT count(*) FROM blobs WHERE owner LIKE 'create:%') AS create_blobs,
           (SELECT count(*) FROM files) AS files,
           (SELECT count(*) FROM idempotency_keys) AS keys
"""


def _leftovers(stack: RunningStack) -> dict[str, int]:
    return dict(db_rows(stack.database_url, LEFTOVERS)[0]._mapping)


def _restart_core_without_crash_points(stack: RunningStack) -> None:
    core = next(c for c in stack.stack.children if c.name == "core")
    stack.stack.stop_child(core)
    stack.stack.children.remove(core)
    stack.stack.env["BATCHGATE_CRASH_AT"] = ""
    stack.stack.start_core()
    stack.stack.wait_ready()


def test_a_create_killed_before_publishing_is_swept_and_its_retry_succeeds(
    db_kind: str, tmp_path: Path
) -> None:
    body = {
        "endpoint": ENDPOINT,
        "completion_window": "24h",
        "requests": [
            {"body": {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": f"crash {i}"}]}}
            for i in range(20)
        ]
        + [{"body": {"model": "gpt-9"}}],  # a rejection too, so a rejections blob is being written
    }
    headers = {"Idempotency-Key": "crash-key"}
    extra = {
        "BATCHGATE_CRASH_AT": "ingest.create.before_publish",
        "BATCHGATE_VALIDATING_TIMEOUT_S": "2",
        "BATCHGATE_INGEST_SWEEP_INTERVAL_S": "0.5",
    }
    with fresh_database(db_kind, tmp_path) as url, running_stack(tmp_path, url, **extra) as stack:
        auth = {"Authorization": f"Bearer {stack.key}", **headers}
        answer = httpx.post(f"{stack.base_url}/batches", json=body, headers=auth, timeout=60)
        assert answer.status_code >= 500  # the core died mid-create; the SDK would retry
        crashed = _leftovers(stack)
        assert crashed["batches"] == 1 and crashed["items"] == 21 and crashed["keys"] == 1
        assert crashed["create_blobs"] >= 1 and crashed["files"] == 0  # nothing published

        _restart_core_without_crash_points(stack)
        deadline = time.monotonic() + 60
        while _leftovers(stack) != {"batches": 0, "items": 0, "create_blobs": 0, "files": 0, "keys": 0}:
            assert time.monotonic() < deadline, _leftovers(stack)
            time.sleep(0.2)

        retry = httpx.post(f"{stack.base_url}/batches", json=body, headers=auth, timeout=60)
        assert retry.status_code == 200, retry.text
        assert "idempotent-replayed" not in retry.headers
        done = wait_for_batch(stack.client(), retry.json()["id"])
        assert (done.status, done.request_counts.completed, done.request_counts.failed) == (
            "completed",
            20,
            1,
        )


def test_the_input_of_an_interrupted_create_says_why_it_cannot_be_deleted_yet(
    db_kind: str, tmp_path: Path
) -> None:
    extra = {
        "BATCHGATE_CRASH_AT": "ingest.create.before_publish",
        "BATCHGATE_VALIDATING_TIMEOUT_S": "8",
        "BATCHGATE_INGEST_SWEEP_INTERVAL_S": "0.5",
    }
    with fresh_database(db_kind, tmp_path) as url, running_stack(tmp_path, url, **extra) as stack:
        client = stack.client()
        source = upload(client, chat_records(3, prefix="held"))
        auth = {"Authorization": f"Bearer {stack.key}"}
        body = {"endpoint": ENDPOINT, "completion_window": "24h", "input_file_id": source.id}
        assert httpx.post(f"{stack.base_url}/batches", json=body, headers=auth, timeout=60).status_code >= 500
        (crashed,) = db_rows(stack.database_url, "SELECT id FROM batches")
        _restart_core_without_crash_points(stack)

        refused = httpx.delete(f"{stack.base_url}/files/{source.id}", headers=auth, timeout=30)
        assert refused.status_code == 409, refused.text
        error = refused.json()["error"]
        assert error["code"] == "file_in_use" and "still being created" in error["message"]
        assert crashed.id not in error["message"]  # no batch the caller cannot see is named
        deadline = time.monotonic() + 60
        while (
            gone := httpx.delete(f"{stack.base_url}/files/{source.id}", headers=auth, timeout=30)
        ).status_code == 409:
            assert time.monotonic() < deadline, "the interrupted create never freed its input"
            time.sleep(0.5)
        assert gone.status_code == 200 and gone.json()["deleted"] is True
