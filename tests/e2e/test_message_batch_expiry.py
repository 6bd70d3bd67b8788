"""A Message Batch that outlives its window: finished requests keep their results, the rest
are `expired`; and `results_url` follows `public_base_url` when one is configured."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.message_batch_support import NATIVE, TERMINAL_WAIT_S, params, sdk
from tests.support import RunningStack, free_port, fresh_database, running_stack

WINDOW_S = 3


@pytest.fixture(scope="module")
def stack(db_kind: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    tmp: Path = tmp_path_factory.mktemp(f"msg-expiry-{db_kind}")
    port = free_port()
    with (
        fresh_database(db_kind, tmp) as url,
        running_stack(
            tmp,
            url,
            BATCHGATE_MESSAGE_BATCH_WINDOW=f"{WINDOW_S}s",
            BATCHGATE_PORT=str(port),
            BATCHGATE_PUBLIC_BASE_URL=f"http://localhost:{port}",
            BATCHGATE_MAINTENANCE_INTERVAL_S="0.25",
            BATCHGATE_EXECUTOR_CONCURRENCY="2",
        ) as running,
    ):
        yield running


def test_unfinished_requests_expire_and_results_url_uses_the_public_url(stack: RunningStack) -> None:
    client = sdk(stack)
    requests = [{"custom_id": "quick", "params": params(NATIVE, "quick")}] + [
        {"custom_id": f"slow-{i}", "params": params(NATIVE, f"slow {i}", x_sim={"delay_ms": 2000})}
        for i in range(6)
    ]
    batch = client.messages.batches.create(requests=requests)
    assert batch.expires_at.timestamp() - batch.created_at.timestamp() == pytest.approx(WINDOW_S, abs=1)
    deadline = time.monotonic() + TERMINAL_WAIT_S
    while (batch := client.messages.batches.retrieve(batch.id)).processing_status != "ended":
        assert time.monotonic() < deadline, batch
        time.sleep(0.2)
    counts = batch.request_counts
    assert counts.expired > 0 and counts.succeeded >= 1 and counts.processing == 0
    assert counts.succeeded + counts.expired + counts.errored == len(requests)
    assert (
        batch.results_url == f"http://localhost:{stack.settings.port}/v1/messages/batches/{batch.id}/results"
    )
    results = {r.custom_id: r.result.type for r in client.messages.batches.results(batch.id)}
    assert results["quick"] == "succeeded"
    assert sorted(results.values()).count("expired") == counts.expired
