"""Crash points: deterministic places where reliability tests make a process die abruptly.

`crash_point("results.finalize.before_publish")` ends the process on the spot (`os._exit`, no
cleanup, like `kill -9`) when the setting `crash_at` (env `BATCHGATE_CRASH_AT`) names that
point; named `fail:<point>`, it instead raises `ConnectionResetError` there once, as a lost
database connection would. Production leaves it empty: the check is one set lookup. Point
names are `<service>.<step>`; grep for `crash_point(` to see them all.

`await pause_point(name)` instead waits `PAUSE_S` there when `crash_at` names `pause:<point>`:
tests widen a race window with it (two creates placing budget holds at once).
"""

from __future__ import annotations

import asyncio
import logging
import os

log = logging.getLogger(__name__)

CRASH_EXIT_CODE = 137
FAIL_PREFIX = "fail:"
PAUSE_PREFIX = "pause:"
PAUSE_S = 1.0
_armed: frozenset[str] = frozenset()
_failed: set[str] = set()


def configure(crash_at: str) -> None:
    """Arm the comma-separated crash points of this process (from `Settings.crash_at`)."""
    global _armed
    _armed = frozenset(p.strip() for p in crash_at.split(",") if p.strip())
    if _armed:
        log.warning("crash points armed: %s", ", ".join(sorted(_armed)))


def crash_point(name: str) -> None:
    if name in _armed:
        log.critical("crash point %s reached: exiting abruptly", name)
        logging.shutdown()
        os._exit(CRASH_EXIT_CODE)
    if FAIL_PREFIX + name in _armed and name not in _failed:
        _failed.add(name)
        log.critical("fault point %s reached: failing once as a lost connection", name)
        raise ConnectionResetError(f"fault point {name}")


async def pause_point(name: str) -> None:
    if PAUSE_PREFIX + name in _armed:
        log.warning("pause point %s reached: waiting %.1f s", name, PAUSE_S)
        await asyncio.sleep(PAUSE_S)
