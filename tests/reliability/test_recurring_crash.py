"""A core process (ingest, scheduler, results) that dies while it creates a template's run,
and stays down past several due times: the run is not half-made, and when the core is back
the template makes exactly one catch-up run, then goes on from the present."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import openai

from batchgate.services.common import cron
from tests.execution_support import private_stack
from tests.recurring_support import (
    QUIET_S,
    Clock,
    runs,
    schedule,
    template,
    wait_for_runs,
)
from tests.support import chat_records, db_rows, eventually, upload, wait_for_batch

EVERY_HOUR = "0 * * * *"


def _answers(client: Any) -> bool:
    """Whether the gateway answers again (the core is back)."""
    try:
        client.batches.list()
    except openai.APIError:
        return False
    return True


def test_a_core_killed_mid_run_and_down_for_hours_makes_one_catch_up_run(
    db_kind: str, tmp_path: Path
) -> None:
    clock = Clock(tmp_path / "clock")
    crash = {"BATCHGATE_CRASH_AT": "ingest.create.before_publish"}
    with private_stack(db_kind, tmp_path, BATCHGATE_TEMPLATE_CLOCK_FILE=str(clock.path), **crash) as stack:
        client = stack.client()
        created = schedule(client, upload(client, chat_records(3, prefix="down")).id, EVERY_HOUR)
        due = created["next_run_at"]
        clock.set(due)  # the run's create reaches the crash point: the core dies there
        (core,) = [c for c in stack.stack.children if c.name == "core"]
        assert core.process is not None and core.process.wait(60) == 137
        published = db_rows(
            stack.database_url,
            "SELECT count(*) FROM batches WHERE template_id = :t AND status <> 'validating'",
            t=created["id"],
        )
        assert published[0][0] == 0  # nothing half-made is visible

        back_at = due + 4 * 3600 + 120  # down for four more due times
        clock.set(back_at)
        stack.stack.env.pop("BATCHGATE_CRASH_AT")
        stack.stack.start_core()
        eventually(lambda: _answers(client))
        (run,) = wait_for_runs(client, created["id"], 1)
        assert wait_for_batch(client, run.id).request_counts.completed == 3
        shown = template(client, created["id"])
        assert shown["last_run_at"] == due and shown["last_error"] is None
        assert shown["next_run_at"] == cron.next_time(EVERY_HOUR, "UTC", back_at)
        time.sleep(QUIET_S)
        assert [r.id for r in runs(client, created["id"])] == [run.id]
