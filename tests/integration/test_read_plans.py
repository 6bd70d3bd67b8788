"""The query plans of every statement a batch GET or listing runs, on SQLite and PostgreSQL:
each finds its rows through an index, and none touches the batch's items, so a poll costs the
same for a batch of 3,000 items as for one of three.

The statements are captured as the real read functions run them (the key check, the batch with
its retries, a page with a cursor and the page's retries), then explained with the same
parameters. PostgreSQL is asked with sequential scans off: a plan that still holds one has no
index to use (on tables this small the planner would pick them anyway).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from sqlalchemy import Engine, event, update

from batchgate.services.common.auth import hash_key
from batchgate.services.common.db import Database, batches, projects
from batchgate.services.common.db.schema import batches as batches_table
from batchgate.services.ingest.lookup import visible_batch_and_retries
from tests.integration.seed import add_batch
from tests.support import prepare_database

PROJECT = "proj-a"


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[Database]:
    await prepare_database(database_url)
    database = Database(database_url)
    try:
        await add_batch(database, "batch_big", 3_000, project=PROJECT)
        for n in range(30):
            await add_batch(database, f"batch_small_{n:02}", 3, project=PROJECT if n % 2 else "proj-b")
        async with database.write() as conn:
            await conn.execute(
                update(batches_table)
                .where(batches_table.c.id == "batch_small_01")
                .values(retry_of="batch_big")
            )
        yield database
    finally:
        await database.dispose()


@pytest.fixture
def captured() -> Iterator[list[tuple[str, Any]]]:
    statements: list[tuple[str, Any]] = []

    def capture(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, many: bool) -> None:
        if statement.lstrip().upper().startswith("SELECT"):
            statements.append((statement, parameters))

    event.listen(Engine, "before_cursor_execute", capture)
    yield statements
    event.remove(Engine, "before_cursor_execute", capture)


async def _plans(db: Database, statements: list[tuple[str, Any]]) -> list[str]:
    plans = []
    async with db.read() as conn:
        if db.is_postgres:
            await conn.exec_driver_sql("SET enable_seqscan = off")
        for statement, parameters in statements:
            explain = "EXPLAIN QUERY PLAN " if db.is_sqlite else "EXPLAIN "
            rows = (await conn.exec_driver_sql(explain + statement, parameters)).all()
            plans.append("\n".join(str(row[-1]) for row in rows))
    return plans


async def test_a_get_and_a_listing_use_indexes_and_never_read_items(
    db: Database, captured: list[tuple[str, Any]]
) -> None:
    async with db.read() as conn:
        await projects.key_owner(conn, hash_key("bg-unknown"), 0.0)
        row, retries = await visible_batch_and_retries(conn, PROJECT, "batch_big")
        page = await batches.page(db, conn, PROJECT, after="batch_small_21", limit=21)
        await batches.retries_of(conn, [r.id for r in page])
    assert (row.id, retries) == ("batch_big", ["batch_small_01"]) and len(page) == 11
    assert len(captured) == 4  # a listing reads no row for its cursor: any id of the kind marks a place
    for (statement, _), plan in zip(captured, await _plans(db, list(captured)), strict=True):
        assert "items" not in statement and "items" not in plan, plan
        if db.is_sqlite:
            scans = [line for line in plan.splitlines() if line.startswith("SCAN")]
            assert not scans, f"{statement}\n{plan}"
        else:
            assert "Seq Scan" not in plan, f"{statement}\n{plan}"
