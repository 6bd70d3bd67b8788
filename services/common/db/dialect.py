"""The SQL that differs between SQLite and PostgreSQL, in one module.

- Row locking for leases: `FOR UPDATE SKIP LOCKED` on PostgreSQL, in a sub-select that runs
  exactly once (`= ANY(ARRAY(…))`); on SQLite the single writer (BEGIN IMMEDIATE under the
  process's write lock) already excludes everyone else.
- Wake-ups: `NOTIFY`/`LISTEN` on PostgreSQL; on SQLite, where only one process writes, the
  in-process signal of the caller is enough, so these are no-ops.
- Leader election for maintenance: a session advisory lock on PostgreSQL; on SQLite the
  single writer process is the leader.
- Bulk inserts: `COPY` on PostgreSQL; Core executemany on SQLite.
- The hot path's statements are built once per dialect (`PerDialect`), with bound
  parameters; one statement over many rows (`DriverMany`) is compiled once per dialect and
  its rows handed to the driver's executemany as tuples.
- Matching a key (and value) inside a JSON-object text column: `jsonb` operators on
  PostgreSQL, `json_each` on SQLite.
- Upserts: `INSERT … ON CONFLICT` in each dialect's spelling.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Generic, TypeVar

from sqlalchemy import (
    ClauseElement,
    ColumnElement,
    Insert,
    Select,
    Table,
    any_,
    cast,
    func,
    literal,
    select,
    text,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.compiler import SQLCompiler

from batchgate.services.common.db.engine import Database
from batchgate.services.common.waits import sleep_unless

log = logging.getLogger(__name__)

LISTEN_PING_S = 30.0


def _values_of(names: Sequence[str]) -> Callable[[Mapping[str, Any]], tuple[Any, ...]]:
    """A row's values of `names`, in that order, as the driver takes them: `itemgetter`
    (half the cost of a generator over the names), a tuple even for one name."""
    getter = operator.itemgetter(*names)
    if len(names) > 1:
        return getter
    return lambda row: (getter(row),)


async def insert_rows(db: Database, table: Table, rows: list[dict[str, Any]]) -> None:
    """Insert `rows` (dicts with the same keys) in one transaction of their own.

    Straight to the driver, skipping SQLAlchemy's per-parameter processing (a third of the
    CPU a large create spends): binary COPY on PostgreSQL, which also costs the server a
    fraction of a multi-row INSERT; executemany inside the usual write transaction on SQLite.
    """
    if not rows:
        return
    columns = list(rows[0])
    values = _values_of(columns)
    records = [values(row) for row in rows]
    if db.is_postgres:
        async with db.engine.connect() as conn:
            driver = (await conn.get_raw_connection()).driver_connection
            assert driver is not None
            async with driver.transaction():
                await driver.copy_records_to_table(table.name, columns=columns, records=records)
        return
    statement = f"INSERT INTO {table.name} ({', '.join(columns)}) VALUES ({', '.join('?' for _ in columns)})"
    async with db.write() as conn:
        driver = (await conn.get_raw_connection()).driver_connection
        assert driver is not None
        await driver.executemany(statement, records)


S = TypeVar("S")


class PerDialect(Generic[S]):
    """A statement built once for each dialect by `build(db)`, then reused with bound parameters.

    Building a Core statement costs more than SQLite takes to run it: the lease UPDATE's
    construction and cache key took ~0.4 ms of Python per call, its execution ~0.1 ms. A
    statement object built once keeps its memoized cache key, so each call only binds its
    parameters and finds the compiled form in SQLAlchemy's cache.
    """

    def __init__(self, build: Callable[[Database], S]) -> None:
        self._build = build
        self._built: dict[str, S] = {}

    def __call__(self, db: Database) -> S:
        found = self._built.get(db.dialect)
        if found is None:
            found = self._built[db.dialect] = self._build(db)
        return found


class DriverMany:
    """One statement run for many parameter rows straight through the driver's executemany.

    SQLAlchemy processes every parameter of every row of a Core executemany in Python
    (`construct_params`, bind processors): on the recorder's path, a fifth of the core's CPU
    per item. The statement stays a Core construct (one source for its SQL); it is compiled
    once per dialect, and each row's dict becomes a tuple in the compiled parameter order,
    with the statement's own literals (say `state = 'queued'`) filled in from the compile.
    Rows must hold values of the column's Python type already (no bind processing runs).
    """

    def __init__(self, statement: ClauseElement) -> None:
        self._statement = statement
        self._compiled: dict[
            str, tuple[str, Callable[[Mapping[str, Any]], tuple[Any, ...]], dict[str, Any]]
        ] = {}

    def _compile(
        self, dialect: Dialect
    ) -> tuple[str, Callable[[Mapping[str, Any]], tuple[Any, ...]], dict[str, Any]]:
        """The SQL, a getter of a row's parameters in their order, and the statement's literals."""
        found = self._compiled.get(dialect.name)
        if found is None:
            compiled = self._statement.compile(dialect=dialect)
            assert isinstance(compiled, SQLCompiler)
            assert compiled.positiontup is not None, "a positional paramstyle (qmark, numeric_dollar)"
            found = (compiled.string, _values_of(list(compiled.positiontup)), dict(compiled.params))
            self._compiled[dialect.name] = found
        return found

    async def run(self, conn: AsyncConnection, rows: Sequence[Mapping[str, Any]]) -> None:
        """Run the statement once per row, in `conn`'s transaction."""
        if not rows:
            return
        sql, ordered, fixed = self._compile(conn.dialect)
        records = [ordered({**fixed, **row}) for row in rows]  # a row's own value wins over a literal
        await conn.exec_driver_sql(sql, records)


def upsert(
    db: Database,
    table: Table,
    row: dict[str, Any],
    keys: tuple[str, ...],
    update: tuple[str, ...] = (),
    where: ColumnElement[bool] | None = None,
) -> Insert:
    """Insert `row`; when a row with the same `keys` exists, set its `update` columns from
    `row` instead if it matches `where` (or leave it as it is, when `update` is empty). The
    row count is 0 when an existing row was left as it is."""
    statement = (postgresql.insert if db.is_postgres else sqlite.insert)(table).values(row)
    if not update:
        return statement.on_conflict_do_nothing(index_elements=list(keys))
    return statement.on_conflict_do_update(
        index_elements=list(keys), set_={c: statement.excluded[c] for c in update}, where=where
    )


def skip_locked(db: Database, query: Select[Any]) -> Select[Any]:
    """Lock the selected rows, skipping rows other transactions hold (PostgreSQL only)."""
    if db.is_postgres:
        return query.with_for_update(skip_locked=True)
    return query


def in_skip_locked(db: Database, column: ColumnElement[Any], query: Select[Any]) -> ColumnElement[bool]:
    """`column IN (query)`, the query's rows locked and other transactions' locked rows skipped.

    On PostgreSQL a plain `IN (SELECT … LIMIT n FOR UPDATE SKIP LOCKED)` may be re-run for every
    outer row when the planner picks a nested loop (it does on small tables), locking n more
    rows each time, so an UPDATE takes more rows than asked; `= ANY(ARRAY(SELECT …))` is an
    init-plan, run once.
    """
    if db.is_postgres:
        return column == any_(func.array(skip_locked(db, query).scalar_subquery()))
    return column.in_(query.scalar_subquery())


def lock_rows(db: Database, query: Select[Any]) -> Select[Any]:
    """Lock the selected rows until commit (PostgreSQL only; SQLite has one writer)."""
    if db.is_postgres:
        return query.with_for_update()
    return query


def json_object_has(
    db: Database, column: ColumnElement[Any], key: str, value: str | None = None
) -> ColumnElement[bool]:
    """True where `column` (text holding a JSON object of strings, or NULL) has `key`, and with
    `value`, has it with that string value. Any key works: it is a bound parameter, never
    spliced into a JSON path."""
    if db.is_postgres:
        found = cast(column, JSONB).op("->>")(key)
        return found.is_not(None) if value is None else found == value
    entries = func.json_each(column).table_valued("key", "value")
    match = entries.c.key == key
    if value is not None:
        match = match & (entries.c.value == value)
    return select(literal(1)).select_from(entries).where(match).exists()


async def notify(db: Database, conn: AsyncConnection, channel: str, payload: str = "") -> None:
    """Wake listeners in other processes once the surrounding transaction commits."""
    if db.is_postgres:
        await conn.execute(text("SELECT pg_notify(:c, :p)"), {"c": channel, "p": payload})


class Listener:
    """Calls `on_notify(payload)` for each NOTIFY on `channel` (PostgreSQL); idle on SQLite.

    Holds one dedicated connection and reconnects when it drops.
    """

    def __init__(self, db: Database, channel: str, on_notify: Callable[[str], None]) -> None:
        self._db = db
        self._channel = channel
        self._on_notify = on_notify

    async def run(self) -> None:
        """Listen until cancelled (returns at once on SQLite)."""
        if not self._db.is_postgres:
            return
        while True:
            try:
                await self._listen_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.warning("LISTEN %s connection lost; reconnecting", self._channel, exc_info=True)
            await asyncio.sleep(1.0)

    async def _listen_once(self) -> None:
        async with self._db.engine.connect() as conn:
            raw = await conn.get_raw_connection()
            driver = raw.driver_connection
            assert driver is not None
            closed = asyncio.Event()

            def on_notify(_conn: Any, _pid: int, _channel: str, payload: str) -> None:
                self._on_notify(payload)

            driver.add_termination_listener(lambda _conn: closed.set())
            await driver.add_listener(self._channel, on_notify)
            try:
                while not await sleep_unless(closed, LISTEN_PING_S):
                    await driver.execute("SELECT 1")  # notice a silently dead socket
            finally:
                with contextlib.suppress(Exception):
                    await driver.remove_listener(self._channel, on_notify)


LEADER_IDLE_FLOOR_S = 30.0
LEADER_IDLE_CHECKS = 10
"""A leader's lock session ends when idle for this many of its check intervals (at least
`LEADER_IDLE_FLOOR_S`): a live leader checks every interval, so only a frozen one lets it lapse
(or a tick that takes longer than that: the lock is about not doing the work twice, not about
correctness, see `scheduler.maintenance`)."""
IDLE_SESSION_TIMEOUT_SINCE = (14,)  # the PostgreSQL version that added idle_session_timeout


class LeaderLock:
    """Maintenance leader election: one holder among all replicas (PostgreSQL advisory lock).

    `await held()` answers whether this process is the leader now, taking the lock when free.
    On SQLite only one process writes, so it always leads.

    The lock lives as long as its session, and a frozen holder (a hung machine, a stopped
    process) keeps its session open: the kernel still answers for its socket. So the session
    asks PostgreSQL to end it once idle for `idle_timeout_s` (`idle_session_timeout`, 14+),
    far more than the holder's `check_interval_s` between two checks, and another replica leads.
    """

    def __init__(self, db: Database, key: int, check_interval_s: float) -> None:
        self._db = db
        self._key = key
        self._conn: AsyncConnection | None = None
        self._leading = False
        self.idle_timeout_s = max(LEADER_IDLE_FLOOR_S, LEADER_IDLE_CHECKS * check_interval_s)

    async def held(self) -> bool:
        if not self._db.is_postgres:
            return True
        try:
            if self._conn is None:
                self._conn = await self._db.engine.connect()
                await self._end_when_idle(self._conn)
            if self._leading:
                # The lock lives as long as this session: proving the session alive suffices.
                await self._conn.execute(text("SELECT 1"))
            else:
                result = await self._conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": self._key})
                self._leading = bool(result.scalar())
            await self._conn.commit()
            return self._leading
        except Exception:
            log.warning("leader lock check failed", exc_info=True)
            await self.release()
            return False

    async def _end_when_idle(self, conn: AsyncConnection) -> None:
        if (conn.dialect.server_version_info or ()) >= IDLE_SESSION_TIMEOUT_SINCE:
            timeout_ms = str(int(self.idle_timeout_s * 1000))
            await conn.execute(
                text("SELECT set_config('idle_session_timeout', :ms, false)"), {"ms": timeout_ms}
            )

    async def release(self) -> None:
        """Give up leading. The connection is discarded, not returned to the pool: a pooled
        session would keep the advisory lock, and nobody (this process included) could lead."""
        self._leading = False
        if self._conn is not None:
            with contextlib.suppress(Exception):
                await self._conn.invalidate()
            with contextlib.suppress(Exception):
                await self._conn.close()
            self._conn = None
