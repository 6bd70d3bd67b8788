"""A replica killed for good is invisible to API clients: two replicas of every service on
PostgreSQL, one of each `kill -9`ed mid-batch and never restarted. A client that does not
retry (the openai SDK with `max_retries=0`) polls the batch, the input file's content and the
partial results through Envoy: no call fails once `CLIENT_GRACE_S` has passed since the kill;
the surviving executor's own calls (lease, renew, record) fail no more than that either; and the
batch still completes, every request exactly once."""

from __future__ import annotations

import datetime
import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.execution_support import finished_exactly_once
from tests.reliability.replica_outages import batch_midway

pytestmark = [pytest.mark.alone, pytest.mark.postgres]

CLIENT_GRACE_S = 1.0
"""After the kill, API calls may fail for at most this long (the target is none at all)."""
BATCH_END_BOUND_S = 30.0
"""The batch ends within this long after the kill: the dead executor's session lapses after the
lease TTL (5 s by default), a surviving scheduler takes over maintenance and rescues its items,
and the rest of the batch runs (about 1,200 items of 50 ms on 64 slots). Generous for 2 noisy
cores."""
POLL_AFTER_KILL_S = 8.0


class Poller(threading.Thread):
    """Reads through Envoy in a loop (no retries), recording each failure and when it came."""

    def __init__(self, stack: Any, batch_id: str, file_id: str) -> None:
        super().__init__(daemon=True)
        self.client = stack.client()
        self.batch_id, self.file_id = batch_id, file_id
        self.stop = threading.Event()
        self.calls = 0
        self.failures: list[tuple[float, str]] = []

    def run(self) -> None:
        calls = (
            lambda: self.client.batches.retrieve(self.batch_id),
            lambda: self.client.files.content(self.file_id).content,
            lambda: self.client.get(
                f"/batches/{self.batch_id}/results",
                cast_to=httpx.Response,
                options={"params": {"partial": "true"}},
            ),
        )
        while not self.stop.is_set():
            for call in calls:
                try:
                    call()
                except Exception as exc:
                    self.failures.append((time.monotonic(), f"{type(exc).__name__}: {exc}"))
                self.calls += 1
            time.sleep(0.02)


def _log_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.startswith("{")]


def _unix(iso: str) -> float:
    return datetime.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def test_killed_replicas_are_invisible_to_clients(tmp_path: Path) -> None:
    with batch_midway(tmp_path, records=1500, prefix="dead", done=300, concurrency=32) as midway:
        stack, batch, records, victims = midway.stack, midway.batch, midway.records, midway.victims
        poller = Poller(stack, batch.id, batch.input_file_id)
        poller.start()
        killed_at, killed_at_wall = time.monotonic(), time.time()
        for victim in victims:
            assert victim.process is not None
            os.kill(victim.process.pid, signal.SIGKILL)
        time.sleep(POLL_AFTER_KILL_S)
        poller.stop.set()
        poller.join(30)

        late = [
            (round(at - killed_at, 2), what)
            for at, what in poller.failures
            if at - killed_at > CLIENT_GRACE_S
        ]
        assert poller.calls > 100
        assert late == [], f"{len(poller.failures)} failed of {poller.calls}: {late[:5]}"
        (survivor,) = [c for c in stack.stack.children if c.role == "executor" and c not in victims]
        failed_calls = [
            line
            for line in _log_lines(stack.log_dir / f"{survivor.name}.log")
            if line["level"] in ("warning", "error")
            and "failed" in line["message"]
            and _unix(line["time"]) > killed_at_wall + CLIENT_GRACE_S
        ]
        assert failed_calls == []

        done, _output, errors = finished_exactly_once(
            stack, batch.id, records, timeout_s=BATCH_END_BOUND_S - (time.monotonic() - killed_at)
        )
        assert (done.status, done.request_counts.completed, errors) == ("completed", 1500, [])
