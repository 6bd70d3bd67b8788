"""Identical reads that arrive together share one database read, and none is ever stale.

Many clients polling one batch (dashboards, an SDK's wait loop on several workers) send the
same read over and over; each cost a database round trip of its own, on the event loop that
also leases and records the batch's items. Here a read joins the next one of the same key
that has not started yet: it waits for the read in flight (which began before it arrived) to
end, then one read serves everyone who arrived meanwhile. So an answer always reflects a
snapshot taken after its request arrived (a write that was answered before a GET was sent is
always seen), and at most one read per key runs at a time, however many clients ask.

Keys must hold everything the answer depends on (the project among them: a read never serves
another project's caller).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

T = TypeVar("T")


class SharedReads(Generic[T]):
    """Per key, the read in flight and the one that starts when it ends."""

    def __init__(self) -> None:
        self._running: dict[Hashable, asyncio.Task[T]] = {}
        self._next: dict[Hashable, asyncio.Task[T]] = {}

    async def read(self, key: Hashable, fetch: Callable[[], Awaitable[T]]) -> T:
        """`fetch()`'s answer, from a call that starts after this one was made; concurrent
        callers of the same `key` share it (a caller that goes away does not stop it)."""
        task = self._next.get(key)
        if task is None:
            task = asyncio.create_task(self._run(key, self._running.get(key), fetch))
            task.add_done_callback(_retrieve)  # an error nobody waits for any more is not logged
            self._next[key] = task
        return await asyncio.shield(task)

    async def _run(
        self, key: Hashable, before: asyncio.Task[T] | None, fetch: Callable[[], Awaitable[T]]
    ) -> T:
        if before is not None:
            await asyncio.wait([before])
        # From here on, callers wait for a read of their own: this one may miss their writes.
        self._running[key] = self._next.pop(key)
        try:
            return await fetch()
        finally:
            del self._running[key]


def _retrieve(task: asyncio.Task[object]) -> None:
    if not task.cancelled():
        task.exception()
