"""Integration fixtures: a migrated database of each kind, opened in the test's process."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from batchgate.services.common.db import Database
from tests.support import prepare_database


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[Database]:
    """Migrated, with the project `default` and a key of it (as a started stack has)."""
    await prepare_database(database_url)
    database = Database(database_url)
    try:
        yield database
    finally:
        await database.dispose()
