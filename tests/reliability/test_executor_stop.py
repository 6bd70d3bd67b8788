"""SIGTERM of the only executor while its calls run (a rolling restart): calls that end within
`executor_shutdown_grace_s` are recorded and never repeated; calls that would outlast it are
cancelled and handed back at once, so the executor exits on time and a restarted one runs them
without waiting for their leases to lapse. The fake upstream sends no `x-request-id`, so the
output's `request_id`s are the executors' own: distinct across the restarts (README "The
output file")."""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path

import pytest

from tests.execution_support import create_batch, finished_exactly_once, private_stack, wait_until
from tests.fake_upstream import FakeUpstream, catalogue, records
from tests.support import RunningStack

pytestmark = pytest.mark.alone  # it bounds how long things take

N = 20
GRACE_ENV = "BATCHGATE_EXECUTOR_SHUTDOWN_GRACE_S"
OWN_REQUEST_ID = re.compile(r"req_[0-9a-f]{32}")
LEASE_TTL_S = 10  # items left to lapse would run again no sooner than this after the stop


def _stop_executor(stack: RunningStack) -> float:
    """SIGTERM executor 0 and wait for it to exit; returns how long that took."""
    (child,) = [c for c in stack.stack.children if c.name == "executor-0" and c.process]
    asked = time.monotonic()
    stack.stack.stop_child(child)
    took = time.monotonic() - asked
    stack.stack.children.remove(child)
    return took


def _all_running(upstream: FakeUpstream, prefix: str) -> None:
    wait_until(
        f"{N} {prefix} calls running",
        lambda: sum(1 for c in upstream.calls() if c.content.startswith(prefix) and not c.status) == N,
        timeout_s=30,
        every_s=0.01,
    )


def test_a_stopped_executor_finishes_short_calls_and_hands_back_long_ones(tmp_path: Path) -> None:
    with FakeUpstream(latency_s=0.0) as upstream:
        # A fixed limit, so that all N calls start at once (the adaptive one starts low).
        provider = {"base_url": upstream.base_url, "adaptive_concurrency": False}
        config = catalogue(tmp_path / "catalogue.yaml", {"fake": provider})
        env = {"BATCHGATE_CONFIG": config, "BATCHGATE_LEASE_TTL_S": str(LEASE_TTL_S), GRACE_ENV: "10"}
        with private_stack("sqlite", tmp_path, **env) as stack:
            # Calls of 2 s, inside the grace: the executor waits for them and records them.
            short = records("fake", "short", N, x_delay_ms=2000)
            batch = create_batch(stack, short)
            _all_running(upstream, "short-")
            waited = _stop_executor(stack)
            assert waited < 8.0, f"stopped after {waited:.1f}s"
            # Running when the stop came (above), answered (not cut off), and not repeated (below).
            assert all(c.status == 200 for c in upstream.calls()), "a call was cut short"
            stack.stack.env[GRACE_ENV] = "0.5"
            stack.stack.start_executor(0)
            done, short_output, errors = finished_exactly_once(stack, batch.id, short, timeout_s=60)
            assert (done.status, done.request_counts.completed, errors) == ("completed", N, [])
            assert len(upstream.calls()) == N, "a call finished within the grace ran again"

            # Calls of 6 s, beyond a 0.5 s grace: cut, handed back, run again at once.
            long = records("fake", "long", N, x_delay_ms=6000)
            batch = create_batch(stack, long)
            _all_running(upstream, "long-")
            stopping = time.time()
            waited = _stop_executor(stack)
            assert waited < 4.0, f"stopped after {waited:.1f}s, not after its 0.5 s grace"
            stack.stack.start_executor(0)
            done, long_output, errors = finished_exactly_once(stack, batch.id, long, timeout_s=60)
            assert (done.status, done.request_counts.completed, errors) == ("completed", N, [])
            long_calls = [c for c in upstream.calls() if c.content.startswith("long-")]
            again = [c.started for c in long_calls if c.started > stopping]
            assert len(again) == N
            # Handed back, so run as soon as an executor is up, not a lease time after the stop.
            late = max(again) - stopping
            assert late < LEASE_TTL_S / 2, f"ran again {late:.1f}s after the stop"

    request_ids = [line["response"]["request_id"] for line in short_output + long_output]
    assert all(OWN_REQUEST_ID.fullmatch(r) for r in request_ids), request_ids[:3]
    assert len(set(request_ids)) == 2 * N


def test_a_stopped_executor_hands_back_what_it_had_not_started_at_once(tmp_path: Path) -> None:
    """Executor 0 runs 16 calls of 6 s and holds 4 more; on SIGTERM (grace 10 s) the 4 start on
    executor 1 at once. They had been handed back only after the running calls ended, 6 s on."""
    with FakeUpstream(latency_s=0.0) as upstream:
        provider = {"base_url": upstream.base_url, "adaptive_concurrency": False, "max_concurrency": 16}
        config = catalogue(tmp_path / "catalogue.yaml", {"fake": provider})
        env = {"BATCHGATE_CONFIG": config, "BATCHGATE_LEASE_TTL_S": str(LEASE_TTL_S), GRACE_ENV: "10"}
        with private_stack("sqlite", tmp_path, **env) as stack:
            held = records("fake", "held", N, x_delay_ms=6000)
            batch = create_batch(stack, held)
            wait_until("16 calls running", lambda: len(upstream.calls()) == 16, timeout_s=30, every_s=0.01)
            stack.stack.start_executor(1)  # idle: executor 0 holds the other 4
            time.sleep(1)
            assert len(upstream.calls()) == 16
            stopping = time.time()
            stopper = threading.Thread(target=_stop_executor, args=(stack,))
            stopper.start()
            wait_until(f"{N} calls started", lambda: len(upstream.calls()) == N, timeout_s=30, every_s=0.01)
            late = max(c.started for c in upstream.calls()) - stopping
            assert late < 3.0, f"the unstarted items started {late:.1f}s after the stop"
            stopper.join(30)
            done, _output, errors = finished_exactly_once(stack, batch.id, held, timeout_s=60)
            assert (done.status, done.request_counts.completed, errors) == ("completed", N, [])
            assert len(upstream.calls()) == N  # the 16 finished within the grace: none ran again
