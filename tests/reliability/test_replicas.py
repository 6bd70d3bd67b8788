"""Several replicas on PostgreSQL: two `batchgate serve scheduler` processes (each on its own
port, listed in BATCHGATE_SCHEDULER_ADDRS) and two executors run one batch; exactly one
scheduler leads maintenance; killing the leader mid-batch hands leadership to the other and
the batch still completes with every custom_id exactly once."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from tests.execution_support import create_batch, finished_exactly_once, wait_until
from tests.reliability.replica_outages import LEADER_LINE
from tests.support import chat_records, fresh_database, replicated_stack


@pytest.mark.postgres
def test_two_schedulers_and_two_executors_share_one_batch(tmp_path: Path) -> None:
    with (
        fresh_database("postgres", tmp_path) as url,
        replicated_stack(
            tmp_path,
            url,
            {"scheduler": 2, "executor": 2},
            BATCHGATE_EXECUTORS="2",
            BATCHGATE_LEASE_TTL_S="3",
            BATCHGATE_MAINTENANCE_INTERVAL_S="0.25",
        ) as stack,
    ):
        schedulers = [c for c in stack.stack.children if c.role == "scheduler"]
        assert len(schedulers) == 2

        def leading() -> list[str]:
            return [
                c.name for c in schedulers if LEADER_LINE in (stack.log_dir / f"{c.name}.log").read_text()
            ]

        client = stack.client()
        records = chat_records(1500, prefix="rep", x_sim={"delay_ms": 50})
        batch = create_batch(stack, records)
        wait_until("one maintenance leader", lambda: len(leading()) == 1, timeout_s=60)
        wait_until(
            "a fifth done",
            lambda: client.batches.retrieve(batch.id).request_counts.completed >= 300,
            timeout_s=180,
        )
        assert len(leading()) == 1
        (leader,) = [c for c in schedulers if c.name == leading()[0]]
        assert leader.process is not None
        os.kill(leader.process.pid, signal.SIGKILL)
        leader.process.wait(30)
        wait_until("the other scheduler takes over maintenance", lambda: len(leading()) == 2, timeout_s=60)

        done, _output, errors = finished_exactly_once(stack, batch.id, records)
        assert (done.status, done.request_counts.completed, errors) == ("completed", 1500, [])
        survivor = next(c for c in schedulers if c is not leader)
        assert survivor.process is not None and survivor.process.poll() is None
