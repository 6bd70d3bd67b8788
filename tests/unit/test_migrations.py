"""Migrations build exactly the schema the code declares, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

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
