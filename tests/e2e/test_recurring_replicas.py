"""Recurring batches with two replicas of ingest and of the scheduler on PostgreSQL: each due
time makes exactly one run, whichever replicas tick and serve it, and however many callers
ask for it at once."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import pytest

from batchgate.internal.v1 import templates_pb2, templates_pb2_grpc
from tests.recurring_support import Clock, runs, schedule, wait_for_runs
from tests.support import chat_records, db_rows, fresh_database, internal_channel, replicated_stack, upload

pytestmark = pytest.mark.postgres

RACERS = 8  # concurrent SpawnRun calls for one due time, spread over both ingest replicas


def test_two_replicas_make_one_run_per_due_time(tmp_path: Path) -> None:
    clock = Clock(tmp_path / "clock")
    replicas = {"ingest": 2, "scheduler": 2, "results": 1, "executor": 1}
    with (
        fresh_database("postgres", tmp_path) as url,
        replicated_stack(tmp_path, url, replicas, BATCHGATE_TEMPLATE_CLOCK_FILE=str(clock.path)) as stack,
    ):
        client = stack.client()
        source = upload(client, chat_records(2, prefix="replicas"))
        ticking = schedule(client, source.id, "* * * * *")
        due = ticking["next_run_at"]
        for count in (1, 2, 3):  # three due times, each served by whichever replicas lead
            clock.set(due)
            wait_for_runs(client, ticking["id"], count)
            due += 60

        # Every ingest replica asked at once, as schedulers that both believe they lead would.
        racing = schedule(client, source.id, "0 0 1 1 *")  # next due in months: no tick takes it
        request = templates_pb2.SpawnRunRequest(
            template_id=racing["id"], due_at=racing["next_run_at"], now=racing["next_run_at"]
        )
        ports = stack.extra["ports"]["ingest"]

        def spawn(index: int) -> templates_pb2.SpawnRunResponse:
            with internal_channel(stack, "ingest", "scheduler", ports[index % len(ports)]) as channel:
                stub = templates_pb2_grpc.TemplateRunsServiceStub(channel)
                return stub.SpawnRun(request, timeout=60)

        with ThreadPoolExecutor(RACERS) as pool:
            answers = list(pool.map(spawn, range(RACERS)))
        made = [a.batch_id for a in answers if a.batch_id]
        assert len(made) == 1 and sum(a.already_done for a in answers) == RACERS - 1, answers
        assert [r.id for r in runs(client, racing["id"])] == made
        rows = db_rows(url, "SELECT count(*) FROM batches WHERE template_id = :t", t=racing["id"])
        assert rows[0][0] == 1  # the losers' drafts were discarded, not left behind

        with (
            internal_channel(stack, "ingest", "executor", ports[0]) as channel,
            pytest.raises(grpc.RpcError) as caught,
        ):
            templates_pb2_grpc.TemplateRunsServiceStub(channel).SpawnRun(request, timeout=10)
        assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
        assert len(runs(client, ticking["id"])) == 3
