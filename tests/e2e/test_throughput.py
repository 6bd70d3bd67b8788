"""The batch object's `throughput` while it runs: plausible under a steady upstream, null once
it ended; shown by the CLI."""

from __future__ import annotations

import time

import pytest

from tests.support import RunningStack, chat_records, run_cli, upload, wait_for_batch

pytestmark = pytest.mark.alone  # it bounds how long things take

ITEMS = 40
STEP_MS = 250  # item i answers after i × STEP_MS: a steady 4 items per second


def test_throughput_follows_a_steady_upstream_and_goes_once_the_batch_ends(
    shared_stack: RunningStack,
) -> None:
    client = shared_stack.client()
    records = chat_records(ITEMS, prefix=f"pace-{time.time_ns()}")
    for i, record in enumerate(records):
        record["body"]["x_sim"] = {"delay_ms": STEP_MS * (i + 1)}
    batch = client.batches.create(
        input_file_id=upload(client, records).id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    deadline = time.monotonic() + 60
    while True:  # until a quarter of the items are done, the pace has a few seconds behind it
        running = client.batches.retrieve(batch.id)
        if running.request_counts.completed >= ITEMS // 4 or running.status != "in_progress":
            break
        assert time.monotonic() < deadline
        time.sleep(0.2)
    assert running.status == "in_progress"
    pace = running.model_extra["throughput"]
    rate = 1000 / STEP_MS
    assert rate / 2 <= pace["items_per_s"] <= rate * 2, pace
    remaining = ITEMS - running.request_counts.completed
    assert pace["eta_s"] is not None and remaining / rate / 3 <= pace["eta_s"] <= remaining / rate * 3, pace
    listed = {b.id: b for b in client.batches.list(limit=10).data}
    assert listed[batch.id].model_extra["throughput"]["items_per_s"] > 0
    env = {"BATCHGATE_BASE_URL": shared_stack.base_url, "BATCHGATE_API_KEY": shared_stack.keys["default"]}
    shown = run_cli("batches", "get", batch.id, env=env)
    assert "items/s" in shown.stdout and "tokens/s" in shown.stdout, shown.stdout

    done = wait_for_batch(client, batch.id)
    assert done.status == "completed" and done.model_extra["throughput"] is None
    tokens_per_item = done.usage.total_tokens / ITEMS
    assert pace["tokens_per_s"] == pytest.approx(pace["items_per_s"] * tokens_per_item, rel=0.5)
