"""Each batch's lease cursor (`services/common/db/lease_cursors.py`): leases pick from it, the
candidates read "has queued items" off it, and every item queued again below it is leased
again.

The cost it removes is PostgreSQL's: with autovacuum off (as on the benchmark machine and in
CI) every leased item leaves its entry in the partial index of queued items, and a pick that
started at the batch's first item, like the candidates' probe for a queued item, stepped over
all of them (a 1,000,000-item batch fell from ~1,800 to ~730 items/s by 42%). EXPLAIN
(ANALYZE, BUFFERS) of the very statements the scheduler runs counts the pages they read.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import orjson
import pytest
from sqlalchemy import event, select, text

from batchgate.services.common.db import Database
from batchgate.services.common.db.queue import _LEASE, runnable
from batchgate.services.common.db.schema import batches
from batchgate.services.scheduler.queue import Queue, Ref
from tests.integration.seed import add_batch

TTL_S = 30.0
ITEMS = 20_000
LEASE = 500
LEFT = 1_000  # queued when the statements are measured


async def _cursor(db: Database, batch_id: str) -> int:
    async with db.read() as conn:
        query = select(batches.c.lease_cursor).where(batches.c.id == batch_id)
        return int((await conn.execute(query)).scalar_one())


def _scans(node: dict[str, Any]) -> list[dict[str, Any]]:
    """The plan's nodes that read the items (their table or one of their indexes)."""
    found = [node] if node.get("Relation Name") == "items" else []
    for child in node.get("Plans", []):
        found += _scans(child)
    return found


def _queued_index_pages(root: dict[str, Any]) -> int:
    """Pages the scans of the partial index of queued items touched (hit or read)."""
    scans = [n for n in _scans(root) if n.get("Index Name") == "ix_items_queued"]
    return sum(n["Shared Hit Blocks"] + n["Shared Read Blocks"] for n in scans)


async def _explain(db: Database, sql: str, params: Any) -> dict[str, Any]:
    """The root of EXPLAIN (ANALYZE, BUFFERS) of a statement as the driver got it, rolled back."""
    async with db.engine.connect() as conn:
        plan = (
            await conn.exec_driver_sql(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {sql}", params)
        ).scalar_one()
        await conn.rollback()
    root: dict[str, Any] = (plan if isinstance(plan, list) else orjson.loads(plan))[0]["Plan"]
    return root


async def _as_sent(db: Database, run: Any) -> tuple[str, Any]:
    """The first statement `run(conn)` sends, and its parameters (then rolled back)."""
    sent: list[tuple[str, Any]] = []

    def capture(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        sent.append((statement, parameters))

    async with db.engine.connect() as conn:
        event.listen(conn.sync_connection, "before_cursor_execute", capture)
        await run(conn)
        await conn.rollback()
    return sent[0]


@pytest.mark.postgres
@pytest.mark.parametrize("db_kind", ["postgres"], indirect=True)
async def test_late_in_a_batch_the_pick_and_the_candidates_skip_what_was_leased(db: Database) -> None:
    await add_batch(db, "b_big", ITEMS)
    async with db.engine.connect() as conn:
        await conn.execute(text("ALTER TABLE items SET (autovacuum_enabled = false)"))
        await conn.execute(text("ANALYZE items"))
        await conn.commit()
    queue = Queue(db, TTL_S)
    for _ in range((ITEMS - LEFT) // LEASE):
        assert len(await queue.lease("e1", LEASE)) == LEASE
    assert await _cursor(db, "b_big") == ITEMS - LEFT
    now = time.time()
    params = {"p_batch": "b_big", "p_count": 64, "p_now": now, "p_session": "e2", "p_request": None}
    pick = await _as_sent(db, lambda conn: conn.execute(_LEASE(db), params))
    candidates = await _as_sent(db, lambda conn: runnable(conn, now, 200))
    pick_plan = await _explain(db, *pick)
    assert [n["Actual Rows"] for n in _scans(pick_plan) if n.get("Index Name") == "ix_items_queued"] == [64]
    # From the batch's first item the pick stepped over the entries of all 19,000 leased items;
    # from the cursor, over the pages of the 64 it takes.
    assert _queued_index_pages(pick_plan) <= 10, _queued_index_pages(pick_plan)
    candidates_plan = await _explain(db, *candidates)
    assert _scans(candidates_plan) == [], "the candidates probed the items"


async def test_an_item_released_below_the_cursor_is_leased_again(db: Database) -> None:
    await add_batch(db, "b1", 200)
    queue = Queue(db, TTL_S)
    leased = [x for _ in range(3) for x in await queue.lease("e1", 50)]
    assert await _cursor(db, "b1") == 150
    assert await queue.release([Ref("b1", x.index, x.attempt) for x in leased if x.index in (7, 90)]) == 2
    assert await _cursor(db, "b1") == 7
    again = await queue.lease("e2", 3)
    assert [(x.index, x.attempt) for x in again] == [(7, 2), (90, 2), (150, 1)]
    assert await _cursor(db, "b1") == 151
    rest = [x for _ in range(2) for x in await queue.lease("e2", 40)]
    assert [x.index for x in rest] == list(range(151, 200))
    assert await _cursor(db, "b1") > 200  # nothing queued: the candidates leave it out
    async with db.read() as conn:
        assert await runnable(conn, time.time(), 200) == []


async def test_a_dead_sessions_items_below_the_cursor_are_leased_again(db: Database) -> None:
    await add_batch(db, "b1", 100)
    short = Queue(db, 0.2)
    dead = await short.lease("e1", 10)
    assert len(await short.lease("e2", 90)) == 90
    async with db.read() as conn:
        assert await runnable(conn, time.time(), 200) == []
    await asyncio.sleep(0.4)
    await short.heartbeat("e2")
    assert await short.rescue_expired() == 10
    assert await _cursor(db, "b1") == 0
    again = await short.lease("e3", 100)
    assert [(x.index, x.attempt) for x in again] == [(x.index, 2) for x in dead]


@pytest.mark.postgres
@pytest.mark.parametrize("db_kind", ["postgres"], indirect=True)
async def test_a_lease_that_rolls_back_leaves_its_items_to_the_next(database_url: str, db: Database) -> None:
    """Another replica's lease skips the items an open lease holds and moves the cursor: not
    past them, since that lease may roll back (a crash, a lost connection)."""
    await add_batch(db, "b1", 200)
    params = {"p_batch": "b1", "p_count": 64, "p_now": time.time(), "p_session": "e1", "p_request": None}
    other = Database(database_url)
    try:
        async with db.engine.connect() as holding:
            assert len((await holding.execute(_LEASE(db), params)).all()) == 64  # open, items locked
            taken = await Queue(other, TTL_S).lease("e2", 64)
            assert [x.index for x in taken] == list(range(64, 128))
            await holding.rollback()
    finally:
        await other.dispose()
    assert await _cursor(db, "b1") == 0
    again = await Queue(db, TTL_S).lease("e3", 64)
    assert [x.index for x in again] == list(range(64))
