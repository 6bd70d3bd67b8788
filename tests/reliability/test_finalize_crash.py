"""Finalize is resumable: the core process dies between writing the files and ending the batch
(crash point `results.finalize.before_publish`), and a restarted core finishes the batch with
no half file ever visible, nothing re-run and nothing written twice."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from sqlalchemy import func, select

from batchgate.services.common.db import Database
from batchgate.services.common.db.schema import batches, blob_chunks, blobs, files, webhook_deliveries
from batchgate.services.common.faults import CRASH_EXIT_CODE
from tests.support import RunningStack, read_jsonl, running_stack, upload, wait_for_batch
from tests.webhook_receiver import WebhookReceiver

ITEMS = 60
DIMENSIONS = 3000  # ~30 KB per output line: the output passes 1 MiB, so chunks hit the database


def embedding_records() -> list[dict[str, Any]]:
    return [
        {
            "custom_id": f"crash-{i}",
            "method": "POST",
            "url": "/v1/embeddings",
            "body": {
                "model": "text-embedding-3-small",
                "input": f"crash input {i}",
                "dimensions": DIMENSIONS,
            },
        }
        for i in range(ITEMS)
    ]


def batch_storage(url: str, batch_id: str) -> dict[str, Any]:
    """What the database holds for the batch: its row, its files, and finalize's blobs."""

    async def read() -> dict[str, Any]:
        db = Database(url)
        try:
            async with db.read() as conn:
                batch = (await conn.execute(select(batches).where(batches.c.id == batch_id))).one()
                file_rows = (await conn.execute(select(files).where(files.c.batch_id == batch_id))).all()
                owned = (
                    await conn.execute(
                        select(blobs.c.id, blobs.c.complete, func.count(blob_chunks.c.seq))
                        .outerjoin(blob_chunks, blob_chunks.c.blob_id == blobs.c.id)
                        .where(blobs.c.owner == f"finalize:{batch_id}")
                        .group_by(blobs.c.id, blobs.c.complete)
                    )
                ).all()
                events = (
                    await conn.execute(select(func.count()).where(webhook_deliveries.c.batch_id == batch_id))
                ).scalar()
            return {"batch": batch, "files": file_rows, "blobs": owned, "events": events}
        finally:
            await db.dispose()

    return asyncio.run(read())


def wait_for_exit(stack: RunningStack, name: str, timeout_s: float = 120.0) -> int:
    child = next(c for c in stack.stack.children if c.name == name)
    assert child.process is not None
    deadline = time.monotonic() + timeout_s
    while (code := child.process.poll()) is None:
        assert time.monotonic() < deadline, f"{name} did not reach the crash point"
        time.sleep(0.1)
    return code


def restart_core(stack: RunningStack) -> None:
    """Start the core process again, this time without the crash point."""
    core = next(c for c in stack.stack.children if c.name == "core")
    stack.stack.stop_child(core)
    stack.stack.children.remove(core)
    del stack.stack.env["BATCHGATE_CRASH_AT"]
    stack.stack.start_core()
    stack.stack.wait_ready()


def test_finalize_crash_before_publish_resumes_with_nothing_half_done(
    database_url: str, tmp_path: Path
) -> None:
    with (
        WebhookReceiver() as receiver,
        running_stack(
            tmp_path,
            database_url,
            BATCHGATE_CRASH_AT="results.finalize.before_publish",
            BATCHGATE_FINALIZE_LEASE_S="2",
        ) as stack,
    ):
        client = stack.client()
        records = embedding_records()
        hook = receiver.fresh_path("crash")
        batch = client.batches.create(
            input_file_id=upload(client, records).id,
            endpoint="/v1/embeddings",
            completion_window="24h",
            extra_body={"webhook_url": receiver.url(hook)},
        )
        assert wait_for_exit(stack, "core") == CRASH_EXIT_CODE

        crashed = batch_storage(stack.database_url, batch.id)
        assert crashed["batch"].status == "finalizing"
        assert crashed["batch"].output_file_id is None and crashed["batch"].completed_count == ITEMS
        assert crashed["files"] == []  # no file of the batch is visible
        assert crashed["blobs"], "the crash came after the output was (partly) written"
        assert all(not complete and chunks >= 1 for _id, complete, chunks in crashed["blobs"])
        assert crashed["events"] == 0

        restart_core(stack)
        done = wait_for_batch(client, batch.id)
        assert done.status == "completed" and done.error_file_id is None

        lines = read_jsonl(client.files.content(done.output_file_id).content)
        assert [line["custom_id"] for line in lines] == [r["custom_id"] for r in records]
        assert all(len(line["response"]["body"]["data"][0]["embedding"]) == DIMENSIONS for line in lines)

        after = batch_storage(stack.database_url, batch.id)
        assert [f.id for f in after["files"]] == [done.output_file_id]  # written once
        assert [complete for _id, complete, _chunks in after["blobs"]] == [True]  # the crashed one is gone
        assert after["events"] == 1
        calls = receiver.wait_for(hook, 1)
        stats = stack.simulator_stats()["by_content"]
        assert all(stats[f"crash input {i}"] == 1 for i in range(ITEMS))  # nothing ran twice
        time.sleep(1.0)
        assert len(receiver.received(hook)) == len(calls) == 1


def test_a_finalize_that_loses_its_database_connection_tries_again_at_once(
    database_url: str, tmp_path: Path
) -> None:
    lease_s = 30.0  # what waiting for the claim to lapse would cost
    with running_stack(
        tmp_path,
        database_url,
        BATCHGATE_CRASH_AT="fail:results.finalize.before_publish",
        BATCHGATE_FINALIZE_LEASE_S=str(lease_s),
    ) as stack:
        client = stack.client()
        records = embedding_records()[:5]
        batch = client.batches.create(
            input_file_id=upload(client, records).id, endpoint="/v1/embeddings", completion_window="24h"
        )
        started = time.monotonic()
        done = wait_for_batch(client, batch.id, timeout_s=lease_s)
        assert time.monotonic() - started < lease_s / 3, "the finalize waited for its own claim to lapse"
        assert done.status == "completed"
        lines = read_jsonl(client.files.content(done.output_file_id).content)
        assert [line["custom_id"] for line in lines] == [r["custom_id"] for r in records]
        after = batch_storage(stack.database_url, batch.id)
        assert [f.id for f in after["files"]] == [done.output_file_id]
        assert [complete for _id, complete, _chunks in after["blobs"]] == [True]  # the failed try's is gone
        logs = stack.logs()
        assert "fault point results.finalize.before_publish" in logs and "trying again" in logs
