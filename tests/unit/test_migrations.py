"""Migrations build exactly the schema the code declares, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import text

from batchgate.services.common.db import Database
from batchgate.services.common.db.migrate import is_current, migrate
from batchgate.services.common.db.schema import metadata
from tests.support import fresh_database


def _diff(url: str) -> list[Any]:
    async def run() -> list[Any]:
        db = Database(url)
        try:
            await migrate(db)
            assert await is_current(db)
            await migrate(db)  # idempotent
            async with db.engine.connect() as conn:
                return await conn.run_sync(
                    lambda c: compare_metadata(MigrationContext.configure(c), metadata)
                )
        finally:
            await db.dispose()

    return asyncio.run(run())


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_migrations_match_the_declared_schema(kind: str, tmp_path: Path) -> None:
    with fresh_database(kind, tmp_path) as url:
        assert _diff(url) == []


@pytest.mark.postgres
def test_usage_event_ids_widen_in_place(tmp_path: Path) -> None:
    """A database made before 0002 keeps its events, and their numbering goes on past int4."""

    async def run(url: str) -> tuple[list[int], str]:
        db = Database(url)
        try:
            await migrate(db, "0001")
            event = "('batch', 'p', 'k', 'b', 0, 'm', 1, 0, 1, 0, 0.0, 1.0)"
            columns = (
                "(source, project_id, api_key_id, batch_id, item_idx, model, input_tokens,"
                " cached_tokens, output_tokens, reasoning_tokens, cost_usd, created_at)"
            )
            async with db.engine.begin() as conn:
                await conn.execute(text(f"INSERT INTO usage_events {columns} VALUES {event}"))
            await migrate(db)
            async with db.engine.begin() as conn:
                await conn.execute(
                    text("SELECT setval(pg_get_serial_sequence('usage_events', 'id'), 2147483647)")
                )
                await conn.execute(text(f"INSERT INTO usage_events {columns} VALUES {event}"))
                ids = list((await conn.execute(text("SELECT id FROM usage_events ORDER BY id"))).scalars())
                kind = (
                    await conn.execute(
                        text(
                            "SELECT data_type FROM information_schema.sequences"
                            " WHERE sequence_name = 'usage_events_id_seq'"
                        )
                    )
                ).scalar()
            return ids, str(kind)
        finally:
            await db.dispose()

    with fresh_database("postgres", tmp_path) as url:
        assert asyncio.run(run(url)) == ([1, 2**31], "bigint")
