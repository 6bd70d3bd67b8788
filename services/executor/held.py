"""What the executor keeps about the items it holds (leased and not yet acknowledged by
results) and the batches that stopped, its counters, and the small waits its loops share
(`services.executor.worker`)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from batchgate.internal.v1 import items_pb2
from batchgate.services.executor.runner import Control

Key = tuple[str, int]
STOP_MEMORY_S = 600.0  # a stopped batch is remembered this long (for leases that raced its stop)


def new_executor_id() -> str:
    return f"executor-{uuid.uuid4().hex[:12]}"


def new_request_id() -> str:
    return uuid.uuid4().hex


@dataclass
class Held:
    ref: items_pb2.ItemRef
    session: str
    """The session that leased it."""
    priority: tuple[int, int]
    """(tier, integer priority) of its batch."""
    control: Control = field(default_factory=Control)
    task: asyncio.Task[None] | None = None

    @property
    def waiting(self) -> bool:
        """Held, not started, not finished: it can be handed back without a trace."""
        return not self.control.started and self.task is not None and not self.task.done()


def lowest_waiting(held: Iterable[Held]) -> tuple[int, int] | None:
    """The lowest priority among held items waiting to start."""
    return min((h.priority for h in held if h.waiting), default=None)


def lowest_waiting_first(held: Iterable[Held], count: int) -> list[Held]:
    """Up to `count` waiting items, the lowest priority first (the latest leased among equals)."""
    return sorted((h for h in held if h.waiting), key=lambda h: (h.priority, -h.control.order))[:count]


class StoppedBatches:
    """Batches that start no new item (cancel, expiry), remembered `STOP_MEMORY_S` for the leases
    that raced their stop. A stop is hard (leases closed, results refused) once any was.

    Each held batch's deadline is a timer that stops it (hard, by `stop`) when it passes. The
    scheduler announces an expiry too, but not while every scheduler is down: items leased ahead
    then started after the deadline, and their answers were kept (hundreds of calls in a test)."""

    def __init__(self, stop: Callable[[str], None]) -> None:
        self._stops: dict[str, tuple[bool, float]] = {}  # batch → (hard, when we heard)
        self._stop = stop
        self._deadlines: dict[str, asyncio.TimerHandle] = {}

    def watch_deadline(self, batch_id: str, expires_at: float) -> None:
        """Stop `batch_id` when `expires_at` (unix seconds; 0: none) passes; at once if it has."""
        if not expires_at or batch_id in self._deadlines:
            return
        delay = expires_at - time.time()
        if delay <= 0:
            self._stop(batch_id)
            return
        loop = asyncio.get_running_loop()
        self._deadlines[batch_id] = loop.call_later(delay, self._deadline_passed, batch_id)

    def _deadline_passed(self, batch_id: str) -> None:
        del self._deadlines[batch_id]
        self._stop(batch_id)

    def note(self, batch_id: str, hard: bool) -> None:
        now = time.monotonic()
        previous = self._stops.get(batch_id)
        self._stops[batch_id] = (hard or (previous is not None and previous[0]), now)
        if len(self._stops) > 1000:
            self._stops = {b: s for b, s in self._stops.items() if now - s[1] < STOP_MEMORY_S}

    def hard(self, batch_id: str) -> bool | None:
        """None while the batch runs; else whether its stop was hard."""
        stop = self._stops.get(batch_id)
        return None if stop is None else stop[0]


@dataclass
class Stats:
    finished: int = 0
    refused: int = 0
    lost: int = 0


async def wait_any(*events: asyncio.Event, timeout_s: float | None = None) -> None:
    """Until one of `events` is set (or `timeout_s` has passed)."""
    waiters = [asyncio.create_task(e.wait()) for e in events]
    try:
        await asyncio.wait(waiters, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
