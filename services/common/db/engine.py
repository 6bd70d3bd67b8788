"""Async SQLAlchemy engines for SQLite (embedded default) and PostgreSQL (several replicas).

`Database.read()` gives a connection for queries; `Database.write()` a transaction for
changes. On SQLite, writes from one process go through one connection under an asyncio lock
and start with `BEGIN IMMEDIATE`, so they queue in-process instead of failing with "database
is locked"; reads use their own pool and, thanks to WAL, never wait for a writer; a thread
copies the log into the file after commits (`checkpointer`). On PostgreSQL both are the same
pooled engine.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeAlias

import aiosqlite
from sqlalchemy import Row, event
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from batchgate.services.common.config import Settings
from batchgate.services.common.db.checkpointer import WRITER_AUTOCHECKPOINT_PAGES, Checkpointer

# A result row of any columns (SQLAlchemy types rows by their column types).
AnyRow: TypeAlias = Row[*tuple[Any, ...]]

# A database's page size is fixed when its first table is made (on a WAL database the pragma
# is a no-op later, so older databases keep theirs). 16 KiB against SQLite's default 4 KiB:
# uploads (1 MiB blob chunks) and creates of 3.8 KB records ~19% faster, finalize ~14%, since
# every page written is a WAL frame and its syscalls; lease and record transactions no
# costlier (bench/README.md, "Page size"). It must be set before WAL is.
SQLITE_PAGE_BYTES = 16384
SQLITE_SYNCHRONOUS = "PRAGMA synchronous=NORMAL"
SQLITE_PRAGMAS = (
    f"PRAGMA page_size={SQLITE_PAGE_BYTES}",
    "PRAGMA journal_mode=WAL",
    SQLITE_SYNCHRONOUS,
    "PRAGMA foreign_keys=ON",
    "PRAGMA busy_timeout=60000",  # another process (CLI, migrate) holding the lock: wait, don't fail
)
# Page caches, per connection, when no settings say otherwise (a Database built by a tool or
# a test): the settings' defaults.
WRITER_CACHE_MIB: int = Settings.sqlite_writer_cache_mib
READER_CACHE_MIB: int = Settings.sqlite_reader_cache_mib
IDLE_TRANSACTION_TIMEOUT_S = 10.0
"""PostgreSQL ends a session whose transaction has waited this long for its process (see
`Database`). batchgate's transactions never wait on anything but their own statements and a
little Python between them: seconds would already be a stall."""


class _InlineConnection(aiosqlite.Connection):
    """The writer's aiosqlite connection, its calls made on the event loop's own thread.

    aiosqlite hands every call to a worker thread and wakes the loop with the answer: two
    thread wake-ups per statement, which cost more than the writer's statements themselves
    (hundreds of microseconds each on a busy 2-core machine, against tens for an indexed
    UPDATE), and a record or lease transaction makes about eight such calls. The writer's
    statements are short and run one at a time under the write lock anyway, so running them
    inline costs other coroutines no more than the thread hand-offs did; the thread is only
    used to open and close the connection.
    """

    async def _execute(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if not self._running or not self._connection:
            raise ValueError("Connection closed")
        return fn(*args, **kwargs)


def _inline_connector(path: str) -> Callable[[], aiosqlite.Connection]:
    def connect() -> aiosqlite.Connection:
        connection = _InlineConnection(lambda: sqlite3.connect(path, check_same_thread=False), 64)
        connection._thread.daemon = True  # as SQLAlchemy does for its own aiosqlite connections
        return connection

    return connect


def _sqlite_engine(url: str, *, immediate: bool, pool_size: int, cache_mib: int) -> AsyncEngine:
    """The writer's (`immediate`) or the readers' engine; the writer checkpoints only as a
    backstop (`checkpointer`)."""
    database = make_url(url).database or ":memory:"
    creator = {"async_creator": _inline_connector(database)} if immediate else {}
    # LIFO: the connection used last (its page cache warm) serves the next read, so a process
    # that reads one thing at a time keeps one reader's cache, not all eight.
    engine = create_async_engine(url, pool_size=pool_size, max_overflow=0, pool_use_lifo=True, **creator)

    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # we emit BEGIN ourselves
        cursor = dbapi_connection.cursor()
        pragmas = [*SQLITE_PRAGMAS, f"PRAGMA cache_size={-cache_mib * 1024}"]  # negative: KiB
        if immediate:
            pragmas.append(f"PRAGMA wal_autocheckpoint={WRITER_AUTOCHECKPOINT_PAGES}")
        for pragma in pragmas:
            cursor.execute(pragma)
        cursor.close()

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(conn: Any) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine


class Database:
    """One per process; shared by every service hosted in that process."""

    def __init__(
        self, url: str, *, writer_cache_mib: int = WRITER_CACHE_MIB, reader_cache_mib: int = READER_CACHE_MIB
    ) -> None:
        """`*_cache_mib`: SQLite's page cache per connection (ignored on PostgreSQL)."""
        self.url = url
        self.dialect = make_url(url).get_backend_name()
        self._write_lock = asyncio.Lock()
        self._checkpointer: Checkpointer | None = None
        if self.is_sqlite:
            database = make_url(url).database
            if database and database != ":memory:":
                Path(database).parent.mkdir(parents=True, exist_ok=True)
                self._checkpointer = Checkpointer(database, SQLITE_SYNCHRONOUS)
            self._writer = _sqlite_engine(url, immediate=True, pool_size=1, cache_mib=writer_cache_mib)
            self._reader = _sqlite_engine(url, immediate=False, pool_size=8, cache_mib=reader_cache_mib)
        else:
            # A frozen process (a hung machine, a stopped replica) keeps its sessions open, and one
            # stopped inside a transaction kept its row locks: every replica's next write to that
            # batch waited for good. PostgreSQL ends such a session; its process, if it resumes,
            # finds the transaction gone and retries as after any lost connection.
            timeout_ms = str(int(IDLE_TRANSACTION_TIMEOUT_S * 1000))
            self._writer = create_async_engine(
                url,
                pool_size=10,
                max_overflow=20,
                pool_pre_ping=True,
                connect_args={"server_settings": {"idle_in_transaction_session_timeout": timeout_ms}},
            )
            self._reader = self._writer

    @property
    def is_sqlite(self) -> bool:
        return self.dialect == "sqlite"

    @property
    def is_postgres(self) -> bool:
        return self.dialect == "postgresql"

    @property
    def engine(self) -> AsyncEngine:
        """The writer engine (migrations, raw connections such as LISTEN)."""
        return self._writer

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncConnection]:
        async with self._reader.connect() as conn:
            yield conn

    @asynccontextmanager
    async def write(self) -> AsyncIterator[AsyncConnection]:
        """A transaction that commits on success and rolls back on error."""
        if self.is_sqlite:
            async with self._write_lock, self._writer.begin() as conn:
                yield conn
            if self._checkpointer is not None:
                self._checkpointer.note_write()
        else:
            async with self._writer.begin() as conn:
                yield conn

    async def dispose(self) -> None:
        if self._checkpointer is not None:
            checkpointer, self._checkpointer = self._checkpointer, None
            await asyncio.to_thread(checkpointer.stop)
        await self._writer.dispose()
        if self._reader is not self._writer:
            await self._reader.dispose()
