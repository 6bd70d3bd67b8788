"""A batch's deadline holds while every scheduler is down: each process in its own process on
PostgreSQL, the only scheduler frozen (SIGSTOP) before the deadline and thawed after it. The
executor holds items it leased ahead; none of them may start after the deadline (the
scheduler, which announces an expiry, cannot), and the batch ends `expired` once it is back.

Before, the executor went on starting what it held, and results kept the answers: hundreds of
upstream calls after the deadline in an operator's test, and a batch `completed` past it."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from tests.fake_upstream import FakeUpstream, catalogue, records
from tests.support import fresh_database, replicated_stack, upload, wait_for_batch

pytestmark = [pytest.mark.alone, pytest.mark.postgres]

WINDOW_S = 10
CALL_S = 4.0  # one call at a time: held items start 4 s apart, the last ones after the deadline


def test_no_held_item_starts_after_the_deadline_while_the_scheduler_is_down(tmp_path: Path) -> None:
    with FakeUpstream(latency_s=CALL_S) as upstream:
        config = catalogue(
            tmp_path / "providers.yaml", {"slow": {"base_url": upstream.base_url, "api_key": "k"}}
        )
        with (
            fresh_database("postgres", tmp_path) as url,
            replicated_stack(
                tmp_path,
                url,
                {},
                BATCHGATE_CONFIG=config,
                BATCHGATE_COMPLETION_WINDOWS=f"24h,{WINDOW_S}s",
                BATCHGATE_EXECUTOR_CONCURRENCY="1",
            ) as stack,
        ):
            client = stack.client()
            batch = client.batches.create(
                input_file_id=upload(client, records("slow", "deadline", 8)).id,
                endpoint="/v1/chat/completions",
                completion_window=f"{WINDOW_S}s",
            )
            (scheduler,) = [c for c in stack.stack.children if c.name == "scheduler-0"]
            assert scheduler.process is not None
            time.sleep(max(batch.expires_at - WINDOW_S / 2 - time.time(), 0))
            os.kill(scheduler.process.pid, signal.SIGSTOP)
            try:
                time.sleep(max(batch.expires_at + CALL_S - time.time(), 0))
            finally:
                os.kill(scheduler.process.pid, signal.SIGCONT)
            done = wait_for_batch(client, batch.id, timeout_s=60)
    starts = sorted(call.started for call in upstream.calls())
    assert starts and starts[0] < batch.expires_at  # it ran before the deadline
    late = [round(t - batch.expires_at, 2) for t in starts if t > batch.expires_at + 0.5]
    assert late == [], f"calls started this long after the deadline: {late}"
    assert done.status == "expired"
    assert done.request_counts.completed < 8 and done.request_counts.total == 8
