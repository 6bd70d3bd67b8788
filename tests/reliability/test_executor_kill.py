"""`kill -9` of the only executor mid-batch, restarted at once, with the default lease time: the
batch ends within seconds of the restart (the dead executor's leases lapse one lease time after
its last heartbeat), and what runs twice upstream is what was running upstream at the kill,
plus outcomes answered in the last moments that results had not stored yet."""

from __future__ import annotations

import os
import signal
import time
from collections import Counter
from pathlib import Path

import pytest

from batchgate.services.common.config import Settings
from tests.execution_support import create_batch, finished_exactly_once, private_stack, wait_until
from tests.fake_upstream import FakeUpstream, catalogue, records
from tests.support import RunningStack

pytestmark = pytest.mark.alone  # it bounds how long things take

N = 2000
LATENCY_S = 0.05
CONCURRENCY = 64
UNRECORDED_WINDOW_S = 0.25  # outcomes answered this close to the kill may not be stored yet


def _kill_executor(stack: RunningStack) -> float:
    (child,) = [c for c in stack.stack.children if c.name == "executor-0" and c.process]
    assert child.process is not None
    os.kill(child.process.pid, signal.SIGKILL)
    killed = time.time()
    stack.stack.stop_child(child)
    stack.stack.children.remove(child)
    return killed


def test_a_killed_executor_costs_one_lease_time_and_repeats_only_what_was_in_flight(
    db_kind: str, tmp_path: Path
) -> None:
    with FakeUpstream(latency_s=LATENCY_S) as upstream:
        provider = {"base_url": upstream.base_url, "max_concurrency": CONCURRENCY}
        config = catalogue(tmp_path / "catalogue.yaml", {"fake": provider})
        with private_stack(db_kind, tmp_path, BATCHGATE_CONFIG=config) as stack:
            batch_records = records("fake", "k", N)
            batch = create_batch(stack, batch_records)
            wait_until("30% answered", lambda: len(upstream.calls()) >= 0.3 * N, timeout_s=120, every_s=0.01)
            killed = _kill_executor(stack)
            stack.stack.start_executor(0)
            restarted = time.time()
            done, _output, errors = finished_exactly_once(stack, batch.id, batch_records, timeout_s=120)
            ended = time.time()
            assert (done.status, done.request_counts.completed, errors) == ("completed", N, [])

    calls = upstream.calls()
    twice = {content for content, n in Counter(c.content for c in calls).items() if n > 1}
    before = [c for c in calls if c.started < killed]
    in_flight = [c for c in before if c.ended is None or c.ended >= killed]
    just_answered = [
        c for c in before if c.ended is not None and killed - UNRECORDED_WINDOW_S <= c.ended < killed
    ]
    assert len(in_flight) <= CONCURRENCY
    assert len(twice) <= len(in_flight) + len(just_answered), (
        f"{len(twice)} ran twice; {len(in_flight)} were in flight at the kill, "
        f"{len(just_answered)} answered in the {UNRECORDED_WINDOW_S}s before it"
    )
    lease_ttl_s = Settings().lease_ttl_s
    took = ended - restarted
    print(f"ran twice {len(twice)}, in flight {len(in_flight)}, answered just before {len(just_answered)}")
    print(f"ended {took:.2f}s after the restart")
    assert took < lease_ttl_s + 6, f"ended {took:.1f}s after the restart"
