"""Retention through the real stack (README "What is stored and for how long"), with the
scheduler's retention clock moved two days ahead (`BATCHGATE_RETENTION_CLOCK_OFFSET_S`): a
project keeping data one day sees its ended batches purged (files, items, results, webhook
deliveries gone and answering 404, but an input file a recurring template reads; bookkeeping
and usage totals kept); one keeping bookkeeping
for a day and a half loses that too; the default 30 days keeps everything."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.e2e.test_keys_and_budgets import cli, new_key
from tests.execution_support import private_stack, wait_until
from tests.support import RunningStack, chat_records, db_rows, free_port, upload, wait_for_batch

DAY_S = 86_400


@pytest.fixture(scope="module")
def stack(db_kind: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    tmp: Path = tmp_path_factory.mktemp(f"retention-{db_kind}")
    env = {"BATCHGATE_RETENTION_CLOCK_OFFSET_S": str(2 * DAY_S), "BATCHGATE_RETENTION_INTERVAL_S": "0.5"}
    with private_stack(db_kind, tmp, **env) as running:
        yield running


def usage(stack: RunningStack, project: str) -> dict[str, Any]:
    answer = httpx.get(
        f"{stack.base_url}/usage",
        params={"start_time": 0},
        headers={"Authorization": f"Bearer {stack.keys[project]}"},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    groups = answer.json()["data"]
    return {
        "requests": sum(g["requests"] for g in groups),
        "rejected": sum(g["rejected_requests"] for g in groups),
        "cost": sum(g["cost"]["amount"] for g in groups),
    }


def start(stack: RunningStack, project: str, *policy: str) -> str:
    """A batch of three good records and a bad one, with a webhook, in a new project."""
    cli(stack, "projects", "create", project, *policy)
    new_key(stack, project)
    client = stack.client(project)
    records: list[Any] = [*chat_records(3, prefix=project), {"custom_id": "bad"}]
    batch = client.batches.create(
        input_file_id=upload(client, records).id,
        endpoint="/v1/chat/completions",
        completion_window="24h",
        extra_body={"webhook_url": f"http://127.0.0.1:{free_port()}/hook"},
    )
    return str(batch.id)


def count(stack: RunningStack, table: str, batch_id: str) -> int:
    return int(
        db_rows(stack.database_url, f"SELECT count(*) FROM {table} WHERE batch_id = :b", b=batch_id)[0][0]
    )


def batch_row(stack: RunningStack, batch_id: str) -> Any:
    rows = db_rows(stack.database_url, "SELECT * FROM batches WHERE id = :b", b=batch_id)
    return rows[0] if rows else None


def _template_run_by(stack: RunningStack, project: str, batch_id: str) -> str:
    """A recurring template of `project` whose run `batch_id` is made out to be (no clock needs
    to move for it to have one)."""
    client = stack.client(project)
    made = client.batches.create(
        input_file_id=client.batches.retrieve(batch_id).input_file_id,
        endpoint="/v1/chat/completions",
        completion_window="24h",
        extra_body={"cron": "0 3 1 1 *"},
    )
    template = str(made.id)  # the template's `btpl_…`
    db_rows(stack.database_url, "UPDATE batches SET template_id = :t WHERE id = :b", t=template, b=batch_id)
    return template


def template_of(stack: RunningStack, project: str, template: str) -> dict[str, Any]:
    answer = httpx.get(
        f"{stack.base_url}/batch_templates/{template}",
        headers={"Authorization": f"Bearer {stack.keys[project]}"},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def test_ended_batches_are_purged_after_their_projects_retention(stack: RunningStack) -> None:
    short = start(stack, "short", "--retention-days", "1")
    template = _template_run_by(stack, "short", short)
    gone = start(stack, "gone", "--retention-days", "1", "--bookkeeping-days", "1.5")
    kept = start(stack, "kept")
    assert "retention=1d bookkeeping=1.5d" in cli(stack, "projects", "list").stdout

    wait_until(
        "short purged", lambda: (batch_row(stack, short) or {"purged_at": None}).purged_at is not None, 60
    )
    row = batch_row(stack, short)
    # Bookkeeping stays: who, which batch, counts, cost; usage totals are those of the items.
    assert (row.total, row.completed_count, row.rejected_count) == (4, 3, 1)
    assert row.api_key_id and row.project_id and row.cost_usd > 0
    assert usage(stack, "short") == {
        "requests": 3,
        "rejected": 1,
        "cost": pytest.approx(row.cost_usd, rel=1e-9),
    }
    # The data is gone, and its ids answer 404.
    assert count(stack, "items", short) == 0 and count(stack, "webhook_deliveries", short) == 0
    client = stack.client("short")
    with pytest.raises(openai.NotFoundError):
        client.batches.retrieve(short)
    assert client.batches.list().data == []
    for file_id in (row.output_file_id, row.error_file_id, row.rejected_file_id):
        assert file_id
        with pytest.raises(openai.NotFoundError):
            client.files.retrieve(file_id)
    file_rows = db_rows(
        stack.database_url,
        "SELECT count(*) FROM files WHERE id IN (:b, :c, :d)",
        b=row.output_file_id,
        c=row.error_file_id,
        d=row.rejected_file_id,
    )
    assert file_rows[0][0] == 0
    # The template's later runs read the input file: it stays (it had been purged with the run,
    # and the template then paused `input_file_deleted`).
    assert client.files.content(row.input_file_id).content
    assert template_of(stack, "short", template)["status"] == "scheduled"
    results = httpx.get(
        f"{stack.base_url}/batches/{short}/results",
        headers={"Authorization": f"Bearer {stack.keys['short']}"},
        timeout=30,
    )
    assert results.status_code == 404
    shown = template_of(stack, "short", template)
    assert shown["recent_runs"] == []  # it showed the purged run, its file ids answering 404

    # Past its bookkeeping period the batch is forgotten altogether.
    wait_until("gone forgotten", lambda: batch_row(stack, gone) is None, 60)
    assert count(stack, "usage_events", gone) == 0
    assert usage(stack, "gone") == {"requests": 0, "rejected": 0, "cost": 0}

    # The default 30 days keep everything (the clock is only two days ahead).
    done = wait_for_batch(stack.client("kept"), kept)
    time.sleep(1.5)  # three retention passes
    assert stack.client("kept").batches.retrieve(kept).status == "completed"
    assert stack.client("kept").files.content(done.output_file_id).content
    assert count(stack, "items", kept) == 4
