"""A create killed mid-way (kill -9 before it publishes) leaves nothing behind once the core
is back: no batch, item, blob or Idempotency-Key claim, so the client's retry runs cleanly."""

from __future__ import annotations

import time
from pathlib import Path

import httpx

from tests.support import RunningStack, db_rows, fresh_database, running_stack, wait_for_batch

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
