"""What the executor keeps about the items it holds (leased and not yet acknowledged by
results), its counters, and the small waits its loops share (`services.executor.worker`)."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from dataclasses import dataclass, field

from batchgate.internal.v1 import items_pb2
from batchgate.services.executor.runner import Control

Key = tuple[str, int]


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


@dataclass
class Stats:
    finished: int = 0
    refused: int = 0
    lost: int = 0


async def wait_any(*events: asyncio.Event) -> None:
    waiters = [asyncio.create_task(e.wait()) for e in events]
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()


async def sleep_unless(event: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(event.wait(), seconds)
