"""Which traced items get a write span at finalize (`items.traced_unrecorded`): those whose
trace has no record span, because no executor reported their outcome."""

from __future__ import annotations

import time

from sqlalchemy import insert

from batchgate.services.common.db import Database, items
from batchgate.services.common.db.schema import items as items_table
from tests.integration.seed import insert_running_batch

TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
STATES = ("succeeded", "failed", "cancelled", "expired", "succeeded")


async def _batch(db: Database, batch_id: str, execution: str) -> None:
    """Items 0-4 in `STATES`, every one traced but the last."""
    async with db.write() as conn:
        await insert_running_batch(
            conn,
            batch_id,
            project_id="proj-a",
            total=len(STATES),
            created_at=time.time(),
            expires_at=time.time() + 3600,
            execution=execution,
        )
        await conn.execute(
            insert(items_table),
            [
                {
                    "batch_id": batch_id,
                    "idx": i,
                    "line": i + 1,
                    "custom_id": f"c-{i}",
                    "state": state,
                    "body": b"{}",
                    "traceparent": TRACEPARENT if i < len(STATES) - 1 else None,
                }
                for i, state in enumerate(STATES)
            ],
        )


async def test_recorded_items_have_their_record_span_and_get_no_write_span(db: Database) -> None:
    await _batch(db, "batch_run", "execute")
    await _batch(db, "batch_native", "native")
    async with db.read() as conn:
        run = await items.traced_unrecorded(conn, "batch_run")
        native = await items.traced_unrecorded(conn, "batch_native")
    # An executor reported items 0 and 1 (their record spans say which file); 2 and 3 ended
    # without one; 4 is not traced.
    assert [(r.idx, r.custom_id, r.state, r.traceparent) for r in run] == [
        (2, "c-2", "cancelled", TRACEPARENT),
        (3, "c-3", "expired", TRACEPARENT),
    ]
    # The provider's batch API ran a native batch's items: no record span for any of them.
    assert [r.idx for r in native] == [0, 1, 2, 3]
