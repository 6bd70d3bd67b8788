"""Integration fixtures: a migrated database of each kind, opened in the test's process."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from batchgate.services.common.db import Database
from batchgate.services.common.db.migrate import migrate


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[Database]:
    database = Database(database_url)
    await migrate(database)
    yield database
    await database.dispose()
