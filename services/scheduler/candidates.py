"""The batches a lease may draw from, read once and reused until work changes.

Reading the candidates (running batches with queued items, ranked per project) is a window
query over the running batches: on SQLite it cost about as much as the lease itself, for
every lease call of every executor. The set only grows when work appears, and every such
path (a batch submitted, items released, a dead session's items queued again, another
replica's NOTIFY) wakes the scheduler's `WorkSignal`: the list read under one signal event is
reused until the next wake, or `MAX_AGE_S` as a backstop. It never decides alone what runs:
the lease statement re-checks that the batch still runs and still has queued items, and a
batch that gave fewer items than asked leaves the list at once (it ran dry or stopped; on
PostgreSQL another replica may hold its other queued rows, and it comes back at the next
wake or within `MAX_AGE_S`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from batchgate.services.scheduler.work_signal import WorkSignal

MAX_AGE_S = 0.5

T = TypeVar("T")


@dataclass
class _Read(Generic[T]):
    event: asyncio.Event
    at: float
    by_batch: dict[str, T]


class CandidateCache(Generic[T]):
    """`get()` returns a copy of the candidates by batch id, read by `read` when the cached
    list is older than the signal's last wake (or than `MAX_AGE_S`)."""

    def __init__(self, signal: WorkSignal | None, read: Callable[[], Awaitable[dict[str, T]]]) -> None:
        self._signal = signal
        self._read = read
        self._last: _Read[T] | None = None

    async def get(self) -> dict[str, T]:
        if self._signal is None:  # nobody tells this queue about new work: read every time
            return await self._read()
        event, now = self._signal.current(), time.monotonic()
        last = self._last
        if last is None or last.event is not event or now - last.at > MAX_AGE_S:
            last = self._last = _Read(event, now, await self._read())
        return dict(last.by_batch)

    def drop(self, batch_id: str) -> None:
        """The batch has nothing more to lease (it ran dry or stopped)."""
        if self._last is not None:
            self._last.by_batch.pop(batch_id, None)
