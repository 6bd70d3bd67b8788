"""A lease whose executor session lapses is leased again with a new fencing token, and the old
holder's late result is refused: once by speaking the internal gRPC APIs directly (precise),
once with a real executor frozen (SIGSTOP) past its lease while a second executor takes the
item over."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import orjson
from sqlalchemy import func, select

from batchgate.internal.v1 import (
    executor_pb2,
    executor_pb2_grpc,
    items_pb2,
    recorder_pb2,
    recorder_pb2_grpc,
    scheduler_pb2,
    scheduler_pb2_grpc,
)
from batchgate.services.common.db import Database
from batchgate.services.common.db.schema import items, usage_events
from tests.execution_support import create_batch, item_rows, private_stack, result_lines, wait_until
from tests.support import RunningStack, chat_records, internal_channel, wait_for_batch


def _completion(text: str) -> bytes:
    return orjson.dumps(
        {
            "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}}],
        }
    )


def _outcome(ref: items_pb2.ItemRef, text: str) -> recorder_pb2.Outcome:
    return recorder_pb2.Outcome(
        ref=ref,
        state=recorder_pb2.OUTCOME_STATE_SUCCEEDED,
        status_code=200,
        response_body=_completion(text),
        request_id=f"req_{text}",
        model="gpt-4o-mini",
        attempts=1,
    )


def test_a_lapsed_lease_is_leased_again_and_the_old_token_is_refused(db_kind: str, tmp_path: Path) -> None:
    env = {
        "BATCHGATE_EXECUTORS": "0",
        "BATCHGATE_LEASE_TTL_S": "1",
        "BATCHGATE_MAINTENANCE_INTERVAL_S": "0.2",
    }
    with private_stack(db_kind, tmp_path, **env) as stack:
        client = stack.client()
        batch = create_batch(stack, chat_records(1, prefix="fence"))
        with (
            internal_channel(stack, "scheduler") as scheduler_channel,
            internal_channel(stack, "results") as results_channel,
        ):
            scheduler = scheduler_pb2_grpc.SchedulerServiceStub(scheduler_channel)
            recorder = recorder_pb2_grpc.RecorderServiceStub(results_channel)

            def lease(holder: str) -> list[scheduler_pb2.LeasedItem]:
                request = scheduler_pb2.LeaseItemsRequest(executor_id=holder, max_items=10, wait_ms=1000)
                return list(scheduler.LeaseItems(request, timeout=30).items)

            (first,) = lease("old-holder")
            assert first.ref.attempt == 1 and first.custom_id == "fence-0"
            # Nobody beats for the old holder: its session lapses, maintenance queues the item again.
            deadline = time.monotonic() + 60
            while not (again := lease("new-holder")):
                assert time.monotonic() < deadline, "the lapsed lease was never re-queued"
            (second,) = again
            assert (second.ref.index, second.ref.attempt) == (first.ref.index, 2)

            beat = scheduler.Heartbeat(
                scheduler_pb2.HeartbeatRequest(executor_id="old-holder", batch_ids=[batch.id]), timeout=10
            )
            assert not beat.alive and list(beat.closing) == []  # its leases are gone, the batch runs

            def record(ref: items_pb2.ItemRef, text: str) -> recorder_pb2.RecordResultsResponse:
                request = recorder_pb2.RecordResultsRequest(executor_id="x", outcomes=[_outcome(ref, text)])
                return recorder.RecordResults(request, timeout=10)

            stale = record(first.ref, "stale")
            assert (stale.accepted, list(stale.refused)) == (0, [first.ref])
            current = record(second.ref, "current")
            assert (current.accepted, current.duplicates, list(current.refused)) == (1, 0, [])
            repeat = record(second.ref, "current")
            assert (repeat.accepted, repeat.duplicates) == (0, 1)
            late = record(first.ref, "stale")
            assert list(late.refused) == [first.ref]

        done = wait_for_batch(client, batch.id)
        assert (done.status, done.request_counts.completed, done.request_counts.failed) == ("completed", 1, 0)
        output, errors = result_lines(client, done)
        assert errors == []
        (line,) = output
        assert line["response"]["body"]["choices"][0]["message"]["content"] == "current"
        assert line["response"]["request_id"] == "req_current"


def _executor_status(stack: RunningStack, port: int) -> executor_pb2.GetExecutorStatusResponse:
    with internal_channel(stack, "executor", "operator", port) as channel:
        stub = executor_pb2_grpc.ExecutorServiceStub(channel)
        return stub.GetExecutorStatus(executor_pb2.GetExecutorStatusRequest(), timeout=10)


def test_a_frozen_executors_item_is_re_run_and_its_late_result_refused(db_kind: str, tmp_path: Path) -> None:
    env = {"BATCHGATE_LEASE_TTL_S": "2", "BATCHGATE_MAINTENANCE_INTERVAL_S": "0.2"}
    with private_stack(db_kind, tmp_path, **env) as stack:
        client = stack.client()
        batch = create_batch(stack, chat_records(1, prefix="frozen", x_sim={"delay_ms": 2500}))
        wait_until("item leased", lambda: item_rows(stack.database_url, batch.id)[0].state == "leased")
        (frozen,) = [c for c in stack.stack.children if c.name == "executor-0"]
        assert frozen.process is not None
        os.kill(frozen.process.pid, signal.SIGSTOP)
        try:
            stack.stack.start_executor(1)
            wait_until(
                "taken over and finished",
                lambda: item_rows(stack.database_url, batch.id)[0].state == "succeeded",
                timeout_s=90,
            )
        finally:
            os.kill(frozen.process.pid, signal.SIGCONT)
        # Taken over under a newer token (the frozen executor's pending long-poll may even have
        # been handed the re-queued item once more before it lapsed again).
        assert item_rows(stack.database_url, batch.id)[0].attempt >= 2
        port = stack.settings.executor_port
        wait_until("the old holder notices", lambda: _stale_count(stack, port) >= 1, timeout_s=60)

        done = wait_for_batch(client, batch.id)
        assert (done.status, done.request_counts.completed) == ("completed", 1)
        output, errors = result_lines(client, done)
        assert len(output) == 1 and errors == []
        assert stack.simulator_stats()["by_content"]["frozen message 0"] >= 2  # it ran again
        assert outcome_counts(stack, batch.id) == (1, 1)  # yet one outcome and one usage record


def outcome_counts(stack: RunningStack, batch_id: str) -> tuple[int, int]:
    """(items succeeded, usage events) of the batch, read from the database."""

    async def read() -> tuple[int, int]:
        db = Database(stack.database_url)
        try:
            async with db.read() as conn:
                succeeded = await conn.scalar(
                    select(func.count()).where(items.c.batch_id == batch_id, items.c.state == "succeeded")
                )
                events = await conn.scalar(select(func.count()).where(usage_events.c.batch_id == batch_id))
                return int(succeeded or 0), int(events or 0)
        finally:
            await db.dispose()

    return asyncio.run(read())


def _stale_count(stack: RunningStack, port: int) -> int:
    status = _executor_status(stack, port)
    return status.refused + status.lost
