"""SQLite's page cache is bounded per connection, the writer's and every reader's: a process
holds at most one writer cache and eight reader caches, whatever it reads."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from sqlalchemy import text

from batchgate.services.common.db import Database
from batchgate.services.common.loading import load_settings


async def test_every_connection_gets_its_bounded_cache(tmp_path: Path) -> None:
    db = Database(f"sqlite+aiosqlite:///{tmp_path / 'db.sqlite'}", writer_cache_mib=3, reader_cache_mib=1)
    all_in = asyncio.Barrier(8)
    sizes: list[int] = []

    async def read_while_others_do() -> None:
        async with db.read() as conn:  # all eight at once: eight distinct pooled connections
            sizes.append((await conn.execute(text("PRAGMA cache_size"))).scalar_one())
            await all_in.wait()

    try:
        await asyncio.wait_for(asyncio.gather(*(read_while_others_do() for _ in range(8))), 30)
        async with db.write() as conn:
            writer = (await conn.execute(text("PRAGMA cache_size"))).scalar_one()
    finally:
        await db.dispose()
    assert sizes == [-1024] * 8  # negative: KiB
    assert writer == -3 * 1024


def test_the_default_caches_are_small() -> None:
    """64 MiB per connection let the core grow by up to 576 MiB on a large batch."""
    settings = load_settings(environ={})
    assert settings.sqlite_writer_cache_mib + 8 * settings.sqlite_reader_cache_mib <= 32


def test_a_cache_of_nothing_is_refused() -> None:
    with pytest.raises(ValueError, match="sqlite_reader_cache_mib"):
        load_settings(environ={"BATCHGATE_SQLITE_READER_CACHE_MIB": "0"})
