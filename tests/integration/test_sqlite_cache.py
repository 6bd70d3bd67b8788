"""SQLite's page cache is bounded per connection, the writer's and every reader's: a process
holds at most one writer cache and eight reader caches, whatever it reads. A new database gets
16 KiB pages; one made before keeps its own."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import text

from batchgate.services.common.db import Database
from batchgate.services.common.db.engine import SQLITE_PAGE_BYTES
from batchgate.services.common.db.migrate import migrate
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


async def test_a_new_database_gets_large_pages(tmp_path: Path) -> None:
    path = tmp_path / "new.sqlite"
    db = Database(f"sqlite+aiosqlite:///{path}")
    try:
        await migrate(db)
    finally:
        await db.dispose()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA page_size").fetchone() == (SQLITE_PAGE_BYTES,)
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 'items'").fetchone() == (1,)


async def test_an_existing_database_keeps_its_pages(tmp_path: Path) -> None:
    """A database made with SQLite's default pages (before this setting) opens and grows as it
    is: the pragma cannot change a WAL database's page size, and must not fail on it."""
    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA page_size=4096")
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("CREATE TABLE earlier (id INTEGER PRIMARY KEY)")
    db = Database(f"sqlite+aiosqlite:///{path}")
    try:
        await migrate(db)
        async with db.write() as conn:
            await conn.execute(text("INSERT INTO earlier (id) VALUES (1)"))
        async with db.read() as conn:
            assert (await conn.execute(text("PRAGMA page_size"))).scalar_one() == 4096
            assert (await conn.execute(text("SELECT count(*) FROM earlier"))).scalar_one() == 1
    finally:
        await db.dispose()
