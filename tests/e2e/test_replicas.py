"""Several replicas of every service behind one Envoy, on PostgreSQL, as the README describes."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from batchgate.internal.v1 import executor_pb2, executor_pb2_grpc
from tests.support import (
    RunningStack,
    chat_records,
    fresh_database,
    internal_channel,
    read_jsonl,
    replicated_stack,
    upload,
    wait_for_batch,
)

pytestmark = pytest.mark.postgres


def _finished_by(stack: RunningStack, port: int) -> int:
    with internal_channel(stack, "executor", "operator", port) as channel:
        stub = executor_pb2_grpc.ExecutorServiceStub(channel)
        return int(stub.GetExecutorStatus(executor_pb2.GetExecutorStatusRequest(), timeout=10).finished)


def test_two_replicas_of_each_service_complete_a_batch_exactly_once(tmp_path: Path) -> None:
    replicas = {"ingest": 2, "scheduler": 2, "results": 2, "executor": 2}
    # Small leases, little concurrency per executor and slow answers (40 x 300 ms over 4 slots
    # is 3 s for one executor, while an idle one polls every second): both must lease from the
    # shared queue.
    with (
        fresh_database("postgres", tmp_path) as url,
        replicated_stack(
            tmp_path,
            url,
            replicas,
            BATCHGATE_LEASE_MAX_ITEMS="4",
            BATCHGATE_EXECUTOR_CONCURRENCY="4",
        ) as stack,
    ):
        names = Counter(child.role for child in stack.stack.children)
        assert {service: names[service] for service in replicas} == replicas

        client = stack.client()
        records = chat_records(40, prefix="replica", x_sim={"delay_ms": 300})
        batch = client.batches.create(
            input_file_id=upload(client, records).id,
            endpoint="/v1/chat/completions",
            completion_window="24h",
        )
        done = wait_for_batch(client, batch.id, timeout_s=180)
        assert done.status == "completed", done
        assert done.request_counts.completed == 40 and done.request_counts.failed == 0

        lines = read_jsonl(client.files.content(done.output_file_id).content)
        assert sorted(line["custom_id"] for line in lines) == sorted(r["custom_id"] for r in records)
        assert len({line["custom_id"] for line in lines}) == len(lines) == 40

        # Each request reached the upstream exactly once, and both executors did part of it.
        calls = stack.simulator_stats()["by_content"]
        assert [calls.get(r["body"]["messages"][0]["content"], 0) for r in records] == [1] * 40
        finished = [_finished_by(stack, port) for port in stack.extra["ports"]["executor"]]
        assert sum(finished) == 40 and all(n > 0 for n in finished), finished

        # Listing goes through either ingest replica and sees the same database.
        assert [b.id for b in client.batches.list(limit=5).data] == [batch.id]
