"""Waking long-polling executors when work appears.

In-process: an event that is swapped on every wake, so each waiter sees exactly the wakes
that happened after it started waiting. Across scheduler replicas (PostgreSQL): a NOTIFY on
`WORK_CHANNEL` that every replica's listener turns into a local wake.
"""

from __future__ import annotations

import asyncio

WORK_CHANNEL = "batchgate_work"


class WorkSignal:
    def __init__(self) -> None:
        self._event = asyncio.Event()

    def wake(self, _payload: str = "") -> None:
        event, self._event = self._event, asyncio.Event()
        event.set()

    def current(self) -> asyncio.Event:
        """Take this before looking for work; wait on it if there was none."""
        return self._event
