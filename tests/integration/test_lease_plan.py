"""The lease statement's cost does not grow with its batch: its plan reads about the rows it
leases, however many of the batch's items are still queued.

The case that went wrong on PostgreSQL: statistics gathered before a batch's items were
queued (as after any large ingest, until autovacuum analyzes again) made the planner walk
the partial index of queued items and filter it by the picked keys, reading every queued
item of the batch for each lease. EXPLAIN ANALYZE of the very statement the scheduler runs
counts the rows each plan node read.
"""

from __future__ import annotations

import time
from typing import Any

import orjson
from sqlalchemy import event, text, update

from batchgate.services.common.db import Database
from batchgate.services.common.db.queue import _LEASE
from batchgate.services.common.db.schema import items
from batchgate.services.common.states import ItemState
from tests.integration.seed import add_batch

QUEUED = 4_000
LEASED = 64


def _rows_read(node: dict[str, Any]) -> int:
    """Rows every scan of `items` in the plan produced or threw away, over all its loops."""
    read = 0
    if node.get("Relation Name") == "items":
        loops = node.get("Actual Loops", 1)
        read += (node.get("Actual Rows", 0) + node.get("Rows Removed by Filter", 0)) * loops
    for child in node.get("Plans", []):
        read += _rows_read(child)
    return read


async def test_a_lease_reads_about_the_rows_it_leases(db: Database, db_kind: str) -> None:
    await add_batch(db, "b_big", QUEUED)
    async with db.write() as conn:  # statistics taken while none of the batch's items was queued
        await conn.execute(update(items).values(state=ItemState.SUCCEEDED))
    if db.is_postgres:
        async with db.engine.connect() as conn:
            await conn.execute(text("ANALYZE items"))
            await conn.commit()
    async with db.write() as conn:
        await conn.execute(update(items).where(items.c.batch_id == "b_big").values(state=ItemState.QUEUED))
    sql, params = await _lease_as_sent(db)
    async with db.engine.connect() as conn:
        if db.is_postgres:
            plan = (await conn.exec_driver_sql(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}", params)).scalar_one()
            await conn.rollback()
            root = (plan if isinstance(plan, list) else orjson.loads(plan))[0]["Plan"]
            assert _rows_read(root) <= 3 * LEASED, f"a lease of {LEASED} read {_rows_read(root)} rows"
        else:
            plan_rows = await conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {sql}", params)
            details = [row[-1] for row in plan_rows]
            assert not [d for d in details if d.startswith("SCAN items")], details


async def _lease_as_sent(db: Database) -> tuple[str, Any]:
    """The lease statement and its parameters as the driver received them (leased, then rolled
    back: the items stay queued)."""
    sent: list[tuple[str, Any]] = []

    def capture(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        sent.append((statement, parameters))

    async with db.engine.connect() as conn:
        event.listen(conn.sync_connection, "before_cursor_execute", capture)
        params = {"p_batch": "b_big", "p_count": LEASED, "p_now": time.time()}
        leased = await conn.execute(_LEASE(db), params | {"p_session": "e1", "p_request": None})
        assert len(leased.all()) == LEASED
        await conn.rollback()
    return sent[-1]
