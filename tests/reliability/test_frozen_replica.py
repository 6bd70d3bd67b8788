"""A frozen replica (a hung machine, a process stopped with SIGSTOP) is no worse for clients than
a dead one: its TCP connections stay open and the kernel still accepts on its port, so nothing
fails fast. Two replicas of every service on PostgreSQL; mid-batch one of each (the maintenance
leader among the schedulers) is stopped. A client that does not retry polls through Envoy: every
call succeeds and none waits longer than `CALL_BOUND_S` (Envoy's HTTP/2 pings find the frozen
connections; without them a call sent there waited the 300 s route timeout). The batch completes
exactly once while they stay frozen (the leader's lock lapses with its idle session, the frozen
executor's leases with its session), and still exactly once after they resume (their stale work
is fenced)."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.execution_support import finished_exactly_once
from tests.reliability.replica_outages import batch_midway

pytestmark = [pytest.mark.alone, pytest.mark.postgres]

CALL_BOUND_S = 12.0
"""No API call waits longer than this while a replica is frozen: Envoy pings each connection every
3 s and drops one whose ping is not answered within 3 s; a read on a dropped stream is retried on
the other replica. Generous for 2 noisy cores."""
FROZEN_FOR_S = 15.0
BATCH_END_BOUND_S = 90.0
"""The batch ends within this long after the freeze, the replicas still frozen: PostgreSQL ends a
frozen process's open transaction after 10 s (its row locks stall the batch until then) and the
leader's lock session after 30 s idle, and the other scheduler leads; the frozen executor's items
are rescued a lease time after that."""


class TimedPoller(threading.Thread):
    """Reads through Envoy in a loop (no retries), recording each call's duration and failure."""

    def __init__(self, stack: Any, batch_id: str, file_id: str) -> None:
        super().__init__(daemon=True)
        self.client = stack.client(timeout=120)
        self.batch_id, self.file_id = batch_id, file_id
        self.stop = threading.Event()
        self.slowest = 0.0
        self.calls = 0
        self.failures: list[str] = []

    def run(self) -> None:
        calls = (
            lambda: self.client.batches.retrieve(self.batch_id),
            lambda: self.client.files.content(self.file_id).content,
            lambda: self.client.batches.list(limit=5),
        )
        while not self.stop.is_set():
            for call in calls:
                started = time.monotonic()
                try:
                    call()
                except Exception as exc:
                    self.failures.append(f"{type(exc).__name__}: {exc}")
                self.slowest = max(self.slowest, time.monotonic() - started)
                self.calls += 1
            time.sleep(0.02)


def test_frozen_replicas_neither_fail_nor_stall_clients(tmp_path: Path) -> None:
    with batch_midway(tmp_path, records=1200, prefix="frozen", done=100, concurrency=16) as midway:
        stack, batch, records, victims = midway.stack, midway.batch, midway.records, midway.victims
        client = stack.client()
        poller = TimedPoller(stack, batch.id, batch.input_file_id)
        poller.start()
        try:
            for victim in victims:
                os.kill(victim.process.pid, signal.SIGSTOP)
            frozen_at = time.monotonic()
            time.sleep(FROZEN_FOR_S)
            poller.stop.set()
            poller.join(CALL_BOUND_S * 10)
            assert not poller.is_alive(), "a call is still waiting on a frozen replica"
            assert poller.calls > 30
            assert poller.failures == [], (
                f"{len(poller.failures)} failed of {poller.calls}: {poller.failures[:5]}"
            )
            assert poller.slowest <= CALL_BOUND_S, f"a call waited {poller.slowest:.1f}s"

            done, _output, errors = finished_exactly_once(
                stack, batch.id, records, timeout_s=BATCH_END_BOUND_S - (time.monotonic() - frozen_at)
            )
            assert (done.status, done.request_counts.completed, errors) == ("completed", 1200, [])
        finally:
            for victim in victims:
                os.kill(victim.process.pid, signal.SIGCONT)
        # Resumed, the stale leader and executor find their sessions gone and their work fenced.
        time.sleep(5)
        again = client.batches.retrieve(batch.id)
        assert (again.status, again.request_counts) == (done.status, done.request_counts)
