"""Copies a SQLite database's write-ahead log back into its file on a thread of its own.

SQLite checkpoints a WAL database in the connection that commits once the log passes
`wal_autocheckpoint` pages: it copies the log's pages into the database file and syncs both
(`synchronous=NORMAL` syncs only there), inside the commit. Our writer commits on the event
loop's thread (`engine._InlineConnection`), so every 16 MiB written stalled the whole process
for the copy and two fsyncs. Here a thread checkpoints shortly after writes instead, with
`PASSIVE`: it takes no lock a writer or reader waits for, and sqlite3 runs it without the
GIL. The writer keeps a higher `wal_autocheckpoint` (`WRITER_AUTOCHECKPOINT_PAGES`) as the
backstop that bounds the log when writes never pause long enough for this thread to catch
up (the log restarts only once a checkpoint has copied all of it). The bound is loose by
what is written during one of this thread's checkpoints: the writer's own finds it busy
and the next commit tries again. What is durable when is
unchanged: commits sync nothing, each checkpoint syncs the log before the file.
"""

from __future__ import annotations

import logging
import sqlite3
import threading

log = logging.getLogger(__name__)

INTERVAL_S = 0.05
"""How long the thread lets a burst of commits run on before it copies their pages: one
checkpoint per burst, not one per commit. An idle database costs the thread nothing."""
WRITER_AUTOCHECKPOINT_PAGES = 4096
"""The writer's own checkpoint threshold: 64 MiB of 16 KiB pages (SQLite's default is 1,000)."""


class Checkpointer:
    """One per SQLite database file and process: `note_write()` after each commit, `stop()`
    when the database is disposed."""

    def __init__(self, path: str, synchronous: str) -> None:
        """`synchronous`: the writer's `PRAGMA synchronous` statement, which decides what a
        checkpoint syncs; the thread's connection runs it too."""
        self._path = path
        self._synchronous = synchronous
        self._written = threading.Event()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sqlite-checkpointer", daemon=True)
        self._thread.start()

    def note_write(self) -> None:
        """A transaction committed: the log has pages to copy. Called for every commit, so a
        wake-up already pending is left alone (`set()` takes the event's lock every time); a
        commit that sees it pending just before the thread clears it is copied by that
        checkpoint, which starts after the clear."""
        if not self._written.is_set():
            self._written.set()

    def stop(self) -> None:
        """Ends the thread after the checkpoint it may be running (blocks: call it off the loop)."""
        self._stopping.set()
        self._written.set()
        self._thread.join()

    def _run(self) -> None:
        connection: sqlite3.Connection | None = None
        try:
            # `_stopping` first: a stop that came between the pause and the clear below had its
            # wake-up cleared, and waiting for another one hung `stop()` (and a process's exit).
            while (
                not self._stopping.is_set() and self._written.wait() and not self._stopping.wait(INTERVAL_S)
            ):
                self._written.clear()
                connection = self._checkpoint(connection)
        finally:
            if connection is not None:
                connection.close()

    def _checkpoint(self, connection: sqlite3.Connection | None) -> sqlite3.Connection | None:
        """Copy the log; the connection opens at the first write (by then the writer has made
        the file with its page size and WAL mode, which a connection opened earlier could
        pre-empt)."""
        try:
            if connection is None:
                connection = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
                connection.execute(self._synchronous)
            connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        except sqlite3.Error as exc:  # the next write asks again; the writer's backstop remains
            log.warning("Background WAL checkpoint of %s failed: %s", self._path, exc)
        return connection
