"""`GET /v1/usage?batch_id=` and `/v1/usage/events?batch_id=` on a batch whose row is gone (a
deleted Message Batch) or purged (retention): its usage events are kept, so the project still
reads them; another project, or an id that never was, still gets 404. The results service's
own servicer on a real database, the batch deleted by the Message Batches delete itself."""

from __future__ import annotations

import time

import pytest
from sqlalchemy import insert, update

from batchgate.services.common.api_shapes import MESSAGES_ENDPOINT
from batchgate.services.common.caller import Principal, current_principal
from batchgate.services.common.db import Database
from batchgate.services.common.db import message_batches as message_store
from batchgate.services.common.db.schema import batches, usage_events
from batchgate.services.common.errors import ApiError
from batchgate.services.results.servicer import ResultsServicer
from batchgate.v1 import results_pb2
from tests.integration.seed import insert_running_batch, usage_event


async def _ended_batch(db: Database, batch_id: str, project: str, endpoint: str, events: int) -> None:
    now = time.time()
    async with db.write() as conn:
        await insert_running_batch(
            conn,
            batch_id,
            project_id=project,
            total=events,
            created_at=now,
            expires_at=now + 3600,
            completed_count=events,
        )
        ended = {"endpoint": endpoint, "status": "completed", "completed_at": now}
        await conn.execute(update(batches).where(batches.c.id == batch_id).values(**ended))
        await conn.execute(
            insert(usage_events), [usage_event(project, batch_id, i, 0.25) for i in range(events)]
        )


async def _usage(servicer: ResultsServicer, project: str, batch_id: str) -> tuple[int, int]:
    """(requests summed, events listed) of `batch_id`, read as a caller of `project`."""
    token = current_principal.set(Principal(project_id=project, key_id="key"))
    try:
        sums = await servicer.GetUsage(results_pb2.GetUsageRequest(batch_id=batch_id), None)  # type: ignore[arg-type]
        listed = await servicer.ListUsageEvents(
            results_pb2.ListUsageEventsRequest(batch_id=batch_id),
            None,  # type: ignore[arg-type]
        )
    finally:
        current_principal.reset(token)
    return sum(g.requests for g in sums.data), len(listed.data)


async def _not_found(servicer: ResultsServicer, project: str, batch_id: str) -> None:
    with pytest.raises(ApiError) as caught:
        await _usage(servicer, project, batch_id)
    assert caught.value.status == 404


async def test_a_deleted_message_batch_keeps_its_usage_for_its_project_only(db: Database) -> None:
    servicer = ResultsServicer(db)
    await _ended_batch(db, "msgbatch_gone", "proj-a", MESSAGES_ENDPOINT, 3)
    assert await _usage(servicer, "proj-a", "msgbatch_gone") == (3, 3)
    async with db.write() as conn:
        row = await message_store.find(conn, "proj-a", "msgbatch_gone")
        assert row is not None and await message_store.delete_ended(conn, row)

    assert await _usage(servicer, "proj-a", "msgbatch_gone") == (3, 3)  # the bill stays readable
    await _not_found(servicer, "proj-b", "msgbatch_gone")  # another project's: still unknown
    await _not_found(servicer, "proj-a", "msgbatch_never")
    await _not_found(servicer, "proj-a", "msgbatch_\x00")  # not a 500 on PostgreSQL


async def test_a_purged_batch_keeps_its_usage_until_its_bookkeeping_goes(db: Database) -> None:
    servicer = ResultsServicer(db)
    await _ended_batch(db, "batch_purged", "proj-a", "/v1/chat/completions", 2)
    async with db.write() as conn:
        await conn.execute(
            update(batches).where(batches.c.id == "batch_purged").values(purged_at=time.time())
        )
    assert await _usage(servicer, "proj-a", "batch_purged") == (2, 2)
    await _not_found(servicer, "proj-b", "batch_purged")
