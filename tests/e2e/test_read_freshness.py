"""Reads of a batch that pollers share (`services/ingest/shared_reads.py`) are never stale:
while other clients hammer the same batch and listing, a metadata update, a cancel and a
retention purge are seen by the very next GET and list, on SQLite and PostgreSQL.

The retention clock runs two days ahead (`BATCHGATE_RETENTION_CLOCK_OFFSET_S`), so a project
that keeps data one day has its batches purged as soon as they end."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.test_keys_and_budgets import cli, new_key
from tests.execution_support import private_stack, wait_until
from tests.support import RunningStack, chat_records, db_rows, upload

DAY_S = 86_400
POLLERS = 8


@pytest.fixture(scope="module")
def stack(db_kind: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    tmp: Path = tmp_path_factory.mktemp(f"freshness-{db_kind}")
    env = {"BATCHGATE_RETENTION_CLOCK_OFFSET_S": str(2 * DAY_S), "BATCHGATE_RETENTION_INTERVAL_S": "0.2"}
    with private_stack(db_kind, tmp, **env) as running:
        yield running


def http(stack: RunningStack, project: str = "default") -> httpx.Client:
    headers = {"Authorization": f"Bearer {stack.keys[project]}"}
    return httpx.Client(base_url=stack.base_url, headers=headers, timeout=30)


@contextlib.contextmanager
def polling(stack: RunningStack, project: str, batch_id: str) -> Iterator[list[int]]:
    """`POLLERS` threads reading the batch back to back (every fourth request a listing) until
    the block ends; yields the count of answers they got, as it grows."""
    stop, answered = threading.Event(), [0]

    def poll() -> None:
        with http(stack, project) as client:
            sent = 0
            while not stop.is_set():
                sent += 1
                client.get("/batches?limit=20" if sent % 4 == 0 else f"/batches/{batch_id}")
                answered[0] += 1

    threads = [threading.Thread(target=poll, daemon=True) for _ in range(POLLERS)]
    for thread in threads:
        thread.start()
    wait_until("the pollers answered", lambda: answered[0] >= 2 * POLLERS, 30)
    try:
        yield answered
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)


def create(stack: RunningStack, project: str, records: list[dict[str, Any]]) -> str:
    client = stack.client(project)
    batch = client.batches.create(
        input_file_id=upload(client, records).id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    return str(batch.id)


def test_metadata_updates_and_a_cancel_are_seen_at_once_by_the_next_read(stack: RunningStack) -> None:
    records = chat_records(4, prefix=f"fresh-{time.time_ns()}")
    for record in records:
        record["body"]["x_sim"] = {"delay_ms": 30_000}  # it stays in progress until cancelled
    batch_id = create(stack, "default", records)
    with polling(stack, "default", batch_id) as answered, http(stack) as client:
        for round_number in range(20):
            metadata = {"round": str(round_number)}
            updated = client.post(f"/batches/{batch_id}/metadata", json={"metadata": metadata})
            assert updated.status_code == 200 and updated.json()["metadata"] == metadata
            assert client.get(f"/batches/{batch_id}").json()["metadata"] == metadata
            listed = {b["id"]: b for b in client.get("/batches", params={"limit": 20}).json()["data"]}
            assert listed[batch_id]["metadata"] == metadata
        cancelled = client.post(f"/batches/{batch_id}/cancel")
        assert cancelled.status_code == 200, cancelled.text
        assert client.get(f"/batches/{batch_id}").json()["status"] in ("cancelling", "cancelled")
        listed = {b["id"]: b for b in client.get("/batches", params={"limit": 20}).json()["data"]}
        assert listed[batch_id]["status"] in ("cancelling", "cancelled")
        assert answered[0] > 2 * POLLERS


def test_a_purged_batch_answers_404_at_once_while_others_poll_it(stack: RunningStack) -> None:
    cli(stack, "projects", "create", "brief", "--retention-days", "1")
    new_key(stack, "brief")
    batch_id = create(stack, "brief", chat_records(3, prefix="brief"))

    def purged() -> bool:
        rows = db_rows(stack.database_url, "SELECT purged_at FROM batches WHERE id = :b", b=batch_id)
        return rows[0].purged_at is not None

    with polling(stack, "brief", batch_id), http(stack, "brief") as client:
        wait_until("the batch purged", purged, 60, every_s=0.01)
        gone = client.get(f"/batches/{batch_id}")
        assert gone.status_code == 404, gone.text
        assert client.get("/batches", params={"limit": 20}).json()["data"] == []
