"""A SQLite database's write-ahead log is copied into its file by a thread of the process, not
by the commit that fills it (`db/checkpointer.py`), and stays bounded under writes that never
pause."""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import text

from batchgate.services.common.db import Database
from batchgate.services.common.db.checkpointer import WRITER_AUTOCHECKPOINT_PAGES, Checkpointer
from batchgate.services.common.db.engine import SQLITE_PAGE_BYTES, SQLITE_SYNCHRONOUS
from tests.support import eventually

MIB = 1024 * 1024


def _checkpointers() -> int:
    return sum(thread.name == "sqlite-checkpointer" for thread in threading.enumerate())


async def _write_mib(db: Database, count: int) -> None:
    async with db.write() as conn:
        await conn.execute(text("CREATE TABLE IF NOT EXISTS scratch (data BLOB)"))
    for _ in range(count):
        async with db.write() as conn:
            await conn.execute(text("INSERT INTO scratch (data) VALUES (:data)"), {"data": os.urandom(MIB)})


async def test_commits_reach_the_file_without_the_writer_checkpointing(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    db = Database(f"sqlite+aiosqlite:///{path}")
    try:
        await _write_mib(db, 4)  # 256 pages: far below the writer's own threshold
        async with db.write() as conn:
            threshold = (await conn.execute(text("PRAGMA wal_autocheckpoint"))).scalar_one()
        # the log copied into the file: only the thread could have done it
        await asyncio.to_thread(eventually, lambda: path.stat().st_size >= 4 * MIB, 10)
    finally:
        await db.dispose()
    assert threshold == WRITER_AUTOCHECKPOINT_PAGES
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM scratch").fetchone() == (4,)


async def test_the_log_stays_bounded_under_unbroken_writes(tmp_path: Path) -> None:
    """The writer's backstop: the log restarts once a checkpoint has copied all of it, which
    the thread alone cannot see happen while commits follow each other without a pause. The
    bound is not exact: while the thread's checkpoint runs, the writer's own finds it busy and
    the next commit tries again, so the log can pass the threshold by what is written
    meanwhile (1.5 MiB seen here). Without the backstop it would hold all 256 MiB."""
    path = tmp_path / "db.sqlite"
    db = Database(f"sqlite+aiosqlite:///{path}")
    threshold = WRITER_AUTOCHECKPOINT_PAGES * SQLITE_PAGE_BYTES
    try:
        await _write_mib(db, 4 * threshold // MIB)
        assert await asyncio.to_thread(os.path.getsize, f"{path}-wal") <= 2 * threshold
    finally:
        await db.dispose()


async def test_dispose_ends_the_thread(tmp_path: Path) -> None:
    before = _checkpointers()
    db = Database(f"sqlite+aiosqlite:///{tmp_path / 'db.sqlite'}")
    await _write_mib(db, 1)
    assert _checkpointers() == before + 1
    await db.dispose()
    assert _checkpointers() == before


def test_a_failed_checkpoint_is_logged_and_tried_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A checkpoint that cannot run (here: no such directory) costs a log line, not the thread:
    the second write's checkpoint is tried, and logged, too."""
    checkpointer = Checkpointer(str(tmp_path / "missing" / "db.sqlite"), SQLITE_SYNCHRONOUS)
    try:
        with caplog.at_level(logging.WARNING, logger="batchgate.services.common.db.checkpointer"):
            for attempt in (1, 2):
                checkpointer.note_write()
                eventually(lambda: len(caplog.records) >= attempt, 10)  # noqa: B023 (called at once)
                assert len(caplog.records) == attempt
        assert all("Background WAL checkpoint" in record.getMessage() for record in caplog.records)
    finally:
        checkpointer.stop()


class _StopBeforeClear(threading.Event):
    """A wake-up event whose first `clear()` lets `stop()` run first: the interleaving in
    which the thread cleared the stop's own wake-up."""

    def __init__(self, stop: Callable[[], None]) -> None:
        super().__init__()
        self._stop = stop

    def clear(self) -> None:
        stop, self._stop = self._stop, lambda: None
        stop()
        super().clear()


def test_a_stop_that_comes_just_before_the_wake_up_is_cleared_still_ends_the_thread(tmp_path: Path) -> None:
    """`stop()` hung for good (and a test's teardown with it) when its wake-up came between the
    thread's pause and its clear."""
    checkpointer = Checkpointer(str(tmp_path / "db.sqlite"), SQLITE_SYNCHRONOUS)
    stopping = checkpointer._stopping  # the interleaving needs the thread's own events

    def stop_arrives() -> None:
        stopping.set()
        threading.Event.set(checkpointer._written)

    waited_on = checkpointer._written  # the thread waits on this one already
    checkpointer._written = _StopBeforeClear(stop_arrives)
    waited_on.set()  # a write: the thread wakes, pauses, then clears (the stop comes first)
    checkpointer._thread.join(timeout=5)
    assert not checkpointer._thread.is_alive()
