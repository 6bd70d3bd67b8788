"""Results taking no outcome (its only replica `kill -9`ed) while a batch runs: the executor
starts no new upstream call until results is back, so what a stop or a crash of the executor
then repeats is what was running. It went on calling and kept ~1,000 answers per executor in
memory, which a SIGTERM dropped unsaid and ran again (830 repeated calls of 2,000 items)."""

from __future__ import annotations

import os
import signal
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.execution_support import create_batch, finished_exactly_once, wait_until
from tests.fake_upstream import FakeUpstream, catalogue, records
from tests.support import RunningStack, fresh_database, replicated_stack

pytestmark = [pytest.mark.alone, pytest.mark.postgres]

CONCURRENCY = 8
N = 120
LATENCY_S = 1.0
QUIET_AFTER_S = LATENCY_S + 0.5
"""The calls running when results died end within LATENCY_S, the first of them sending what
fails; after that none may start. Before, the items the executor held waiting (twice the
concurrency) went on starting as slots freed, and it leased more as results came back."""


def _child(stack: RunningStack, role: str) -> object:
    (child,) = [c for c in stack.stack.children if c.role == role and c.process]
    return child


def test_no_call_starts_while_results_takes_no_outcome(tmp_path: Path) -> None:
    with FakeUpstream(latency_s=LATENCY_S) as upstream:
        provider = {"base_url": upstream.base_url, "adaptive_concurrency": False}
        config = catalogue(tmp_path / "catalogue.yaml", {"fake": provider})
        env = {
            "BATCHGATE_CONFIG": config,
            "BATCHGATE_EXECUTOR_CONCURRENCY": str(CONCURRENCY),
            "BATCHGATE_EXECUTOR_SHUTDOWN_GRACE_S": "2",
        }
        with fresh_database("postgres", tmp_path) as url, replicated_stack(tmp_path, url, {}, **env) as stack:
            lines = records("fake", "outage", N)
            batch = create_batch(stack, lines)
            client = stack.client()
            wait_until("16 done", lambda: client.batches.retrieve(batch.id).request_counts.completed >= 16)

            results = _child(stack, "results")
            os.kill(results.process.pid, signal.SIGKILL)  # type: ignore[attr-defined]
            results.process.wait(10)  # type: ignore[attr-defined]
            killed = time.time()
            stack.stack.children.remove(results)
            time.sleep(QUIET_AFTER_S + 2.0)
            late = [c for c in upstream.calls() if c.started > killed + QUIET_AFTER_S]
            assert late == [], f"{len(late)} calls started while results was gone"

            executor = _child(stack, "executor")
            stack.stack.stop_child(executor)  # SIGTERM: a rolling restart during the outage
            stack.stack.children.remove(executor)
            log = (stack.log_dir / "executor-0.log").read_text()
            assert "results took no answer for" in log  # the answers it drops are said

            stack.stack.start_service("results", 0, stack.extra["ports"]["results"][0])
            stack.stack.start_service("executor", 0, stack.extra["ports"]["executor"][0])
            done, output, _errors = finished_exactly_once(stack, batch.id, lines)
            assert done.request_counts.completed == N and len(output) == N
            repeated = [
                content for content, n in Counter(c.content for c in upstream.calls()).items() if n > 1
            ]
            # What was running when results died, and at most a call per slot that started as
            # one ended, before the first refused send was heard.
            assert len(repeated) <= 2 * CONCURRENCY, f"{len(repeated)} items ran twice"
