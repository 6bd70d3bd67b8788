"""Apply (or check) the Alembic migrations against a database URL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from batchgate.services.common.db.engine import Database

MIGRATIONS = Path(__file__).resolve().parent / "migrations"


def alembic_config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    return config


async def migrate(db: Database, revision: str = "head") -> None:
    """Bring the schema to `revision`; safe to run on every start."""

    def _upgrade(sync_conn: Any) -> None:
        config = alembic_config()
        config.attributes["connection"] = sync_conn
        command.upgrade(config, revision)

    async with db.engine.begin() as conn:
        await conn.run_sync(_upgrade)


async def is_current(db: Database) -> bool:
    """Whether the database is at the newest revision."""
    heads = set(ScriptDirectory.from_config(alembic_config()).get_heads())

    def _current(sync_conn: Any) -> set[str]:
        return set(MigrationContext.configure(sync_conn).get_current_heads())

    async with db.engine.connect() as conn:
        return await conn.run_sync(_current) == heads
