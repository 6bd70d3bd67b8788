"""RecordResults stores each outcome exactly once and keeps the batch's progress current.

A stack without executors: the test leases items from the real scheduler and reports outcomes
to the real results service over their internal gRPC APIs, exactly as an executor does, so it
can send repeats, stale tokens and late results on purpose.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from sqlalchemy import select

from batchgate.internal.v1 import (
    items_pb2,
    recorder_pb2,
    recorder_pb2_grpc,
    scheduler_pb2,
    scheduler_pb2_grpc,
)
from batchgate.services.common.db import Database
from batchgate.services.common.db.schema import items
from batchgate.services.results.pricing import item_cost
from tests.support import (
    RunningStack,
    chat_records,
    internal_channel,
    read_jsonl,
    running_stack,
    upload,
    wait_for_batch,
)

USAGE = recorder_pb2.TokenUsage(prompt_tokens=10, completion_tokens=20, cached_tokens=4, reasoning_tokens=3)


@pytest.fixture
def stack(database_url: str, tmp_path: Path) -> Iterator[RunningStack]:
    with running_stack(tmp_path, database_url, BATCHGATE_EXECUTORS="0", BATCHGATE_LEASE_TTL_S="1") as running:
        yield running


def success(batch_id: str, index: int, attempt: int) -> recorder_pb2.Outcome:
    body = {
        "id": f"chatcmpl-{index}",
        "object": "chat.completion",
        "choices": [],
        "usage": {"prompt_tokens": 10},
    }
    return recorder_pb2.Outcome(
        ref=items_pb2.ItemRef(batch_id=batch_id, index=index, attempt=attempt),
        state=recorder_pb2.OUTCOME_STATE_SUCCEEDED,
        status_code=200,
        response_body=orjson.dumps(body),
        request_id=f"req_{index}",
        model="gpt-4o-mini",
        provider="simulated",
        usage=USAGE,
        attempts=1,
    )


def failure(batch_id: str, index: int, attempt: int, **fields: Any) -> recorder_pb2.Outcome:
    return recorder_pb2.Outcome(
        ref=items_pb2.ItemRef(batch_id=batch_id, index=index, attempt=attempt),
        state=recorder_pb2.OUTCOME_STATE_FAILED,
        model="gpt-4o-mini",
        **fields,
    )


def item_state(url: str, batch_id: str, index: int) -> str:
    async def read() -> str:
        db = Database(url)
        try:
            async with db.read() as conn:
                query = select(items.c.state).where(items.c.batch_id == batch_id, items.c.idx == index)
                return str((await conn.execute(query)).scalar_one())
        finally:
            await db.dispose()

    return asyncio.run(read())


def test_outcomes_are_stored_once_and_progress_moves_with_each_group(stack: RunningStack) -> None:
    client = stack.client()
    batch = client.batches.create(
        input_file_id=upload(client, chat_records(6, prefix="rec")).id,
        endpoint="/v1/chat/completions",
        completion_window="24h",
    )
    with (
        internal_channel(stack, "scheduler") as scheduler_channel,
        internal_channel(stack, "results") as results_channel,
    ):
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(scheduler_channel)
        recorder = recorder_pb2_grpc.RecorderServiceStub(results_channel)

        def lease(n: int, session: str) -> dict[int, int]:
            answer = scheduler.LeaseItems(
                scheduler_pb2.LeaseItemsRequest(executor_id=session, max_items=n, wait_ms=2000), timeout=30
            )
            return {i.ref.index: i.ref.attempt for i in answer.items}

        def record(*outcomes: recorder_pb2.Outcome) -> recorder_pb2.RecordResultsResponse:
            return recorder.RecordResults(
                recorder_pb2.RecordResultsRequest(executor_id="test", outcomes=outcomes), timeout=30
            )

        assert lease(4, "first") == {0: 1, 1: 1, 2: 1, 3: 1}
        first = record(success(batch.id, 0, 1), success(batch.id, 1, 1))
        assert (first.accepted, first.duplicates, list(first.refused)) == (2, 0, [])

        running = client.batches.retrieve(batch.id)
        assert running.status == "in_progress"
        assert (running.request_counts.completed, running.request_counts.failed) == (2, 0)
        assert running.usage.input_tokens == 20 and running.usage.output_tokens == 40
        assert running.usage.input_tokens_details.cached_tokens == 8
        assert running.usage.output_tokens_details.reasoning_tokens == 6
        one = item_cost(stack.settings, "gpt-4o-mini", 10, 4, 20, 0.5)
        assert running.model_extra["cost"]["amount"] == pytest.approx(2 * one, rel=1e-9)

        repeat = record(success(batch.id, 0, 1), success(batch.id, 1, 1))
        assert (repeat.accepted, repeat.duplicates) == (0, 2)
        wrong = record(success(batch.id, 2, 0), success(batch.id, 2, 7))
        assert wrong.accepted == 0 and [r.index for r in wrong.refused] == [2, 2]

        # Nobody beats for the session: the leases of 2 and 3 lapse and are queued again. Nobody
        # has leased 3 since: its late result is the only one there can be, and is kept.
        deadline = time.monotonic() + 30
        while item_state(stack.database_url, batch.id, 3) != "queued":
            assert time.monotonic() < deadline
            time.sleep(0.1)
        late = record(success(batch.id, 3, 1))
        assert late.accepted == 1

        # 2 is leased again (token 2), by a new session: a result under token 1 is now stale.
        assert lease(10, "second") == {2: 2, 4: 1, 5: 1}
        stale = record(success(batch.id, 2, 1))
        assert stale.accepted == 0 and [(r.index, r.attempt) for r in stale.refused] == [(2, 1)]
        upstream_error = b'{"error":{"message":"no","type":"invalid_request_error","param":null,"code":"x"}}'
        last = record(
            success(batch.id, 2, 2),
            failure(batch.id, 4, 1, status_code=400, response_body=upstream_error, request_id="req_4"),
            failure(batch.id, 5, 1, error_code="request_timeout", error_message="too slow"),
            failure(batch.id, 5, 1, error_code="request_timeout", error_message="too slow"),  # same group
        )
        assert (last.accepted, last.duplicates) == (3, 1)

    done = wait_for_batch(client, batch.id)
    assert done.status == "completed"
    assert (done.request_counts.completed, done.request_counts.failed) == (4, 2)
    assert done.usage.input_tokens == 4 * 10  # the failures used nothing
    assert done.model_extra["cost"]["amount"] == pytest.approx(4 * one, rel=1e-9)
    output = read_jsonl(client.files.content(done.output_file_id).content)
    assert [line["custom_id"] for line in output] == ["rec-0", "rec-1", "rec-2", "rec-3"]
    errors = read_jsonl(client.files.content(done.error_file_id).content)
    assert errors[0]["response"]["status_code"] == 400 and errors[0]["error"] is None
    assert errors[1]["response"] is None and errors[1]["error"] == {
        "code": "request_timeout",
        "message": "too slow",
    }

    events = httpx.get(
        f"{stack.base_url}/usage/events",
        params={"batch_id": batch.id},
        headers={"Authorization": f"Bearer {stack.key}"},
        timeout=30,
    ).json()["data"]
    assert sorted(e["item_index"] for e in events) == [0, 1, 2, 3, 4, 5]  # one per item, repeats or not
