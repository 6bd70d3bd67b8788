"""kill -9 in the middle of a batch: an executor, the core process (ingest, scheduler and
results), and the core at a chosen point (right after it leased items, before the executor
heard: the executor's repeated lease call collects them). Every custom_id ends up exactly once
across the output and error files; after a core restart, items that had already run are not
run again."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from tests.execution_support import create_batch, finished_exactly_once, item_rows, private_stack, wait_until
from tests.support import RunningStack, chat_records

FAST_MAINTENANCE = {"BATCHGATE_MAINTENANCE_INTERVAL_S": "0.25"}


def _completed(stack: RunningStack, batch_id: str) -> int:
    return int(stack.client().batches.retrieve(batch_id).request_counts.completed)


def _kill(stack: RunningStack, name: str) -> None:
    (child,) = [c for c in stack.stack.children if c.name == name and c.process and c.process.poll() is None]
    assert child.process is not None
    os.kill(child.process.pid, signal.SIGKILL)
    child.process.wait(30)


def _calls_per_record(stack: RunningStack, records: list[dict]) -> set[int]:
    calls = stack.simulator_stats()["by_content"]
    return {calls.get(r["body"]["messages"][0]["content"], 0) for r in records}


def test_kill_9_of_an_executor_mid_batch_loses_and_repeats_nothing(db_kind: str, tmp_path: Path) -> None:
    env = {"BATCHGATE_EXECUTORS": "2", "BATCHGATE_LEASE_TTL_S": "3", **FAST_MAINTENANCE}
    with private_stack(db_kind, tmp_path, **env) as stack:
        records = chat_records(2000, prefix="kx", x_sim={"delay_ms": 100})
        batch = create_batch(stack, records)
        wait_until("a fifth done", lambda: _completed(stack, batch.id) >= 400, timeout_s=180)
        _kill(stack, "executor-0")
        done, _output, errors = finished_exactly_once(stack, batch.id, records)
        assert (done.status, done.request_counts.completed, errors) == ("completed", 2000, [])
        # The killed executor held leases: those items were taken over under a new token.
        assert max(row.attempt for row in item_rows(stack.database_url, batch.id)) >= 2


def test_kill_9_of_the_core_mid_batch_loses_nothing_and_re_runs_nothing(db_kind: str, tmp_path: Path) -> None:
    with private_stack(db_kind, tmp_path, BATCHGATE_LEASE_TTL_S="10", **FAST_MAINTENANCE) as stack:
        records = chat_records(600, prefix="kc", x_sim={"delay_ms": 100})
        batch = create_batch(stack, records)
        wait_until("a sixth done", lambda: _completed(stack, batch.id) >= 100, timeout_s=180)
        _kill(stack, "core")
        time.sleep(1.0)  # the executor keeps running its items and holds their outcomes
        stack.stack.start_core()
        done, _output, errors = finished_exactly_once(stack, batch.id, records)
        assert (done.status, done.request_counts.completed, errors) == ("completed", 600, [])
        assert _calls_per_record(stack, records) == {1}, "an item ran twice (or never)"


def test_core_crash_right_after_leasing_loses_no_lease(db_kind: str, tmp_path: Path) -> None:
    crash = {"BATCHGATE_CRASH_AT": "scheduler.lease.after_commit"}
    # The default lease time: the restarted core waits one lease time before its first rescue,
    # and the executor (retrying with backoff of up to 2 s, plus reconnecting) must beat again
    # within it; 2 s left no margin on a loaded machine.
    env = {"BATCHGATE_EXECUTORS": "0", "BATCHGATE_LEASE_TTL_S": "5", **FAST_MAINTENANCE, **crash}
    with private_stack(db_kind, tmp_path, **env) as stack:
        records = chat_records(50, prefix="cp")
        batch = create_batch(stack, records)
        stack.stack.start_executor(0)  # its first lease commits, then the core dies before answering
        (core,) = [c for c in stack.stack.children if c.name == "core"]
        assert core.process is not None
        assert core.process.wait(60) == 137
        assert {row.state for row in item_rows(stack.database_url, batch.id)} == {"leased"}
        stack.stack.env.pop("BATCHGATE_CRASH_AT")
        stack.stack.start_core()
        done, _output, errors = finished_exactly_once(stack, batch.id, records, timeout_s=120)
        assert (done.status, done.request_counts.completed, errors) == ("completed", 50, [])
        # The executor repeated its unanswered lease call and got what it had leased: the
        # items ran under their first lease, without waiting for it to lapse.
        assert {row.attempt for row in item_rows(stack.database_url, batch.id)} == {1}
        assert _calls_per_record(stack, records) == {1}
