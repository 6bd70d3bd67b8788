"""Sleeping until an event is set or a timeout passes, without ever losing a cancellation.

On Python 3.11, `asyncio.wait_for(event.wait(), seconds)` returns normally when its task is
cancelled in the same loop turn as the event is set: the cancellation is swallowed. A loop that
sleeps that way between rounds and is stopped by cancelling it (the webhook deliverer, the
scheduler's long poll, the executor's pauses, the PostgreSQL listener) then runs on after it was
told to stop, and whoever awaits it hangs. A test that stopped two webhook deliverers hung for
its full 300 s limit that way. `asyncio.timeout` counts cancellations, so one from outside
always wins.
"""

from __future__ import annotations

import asyncio


async def sleep_unless(event: asyncio.Event, seconds: float) -> bool:
    """Wait until `event` is set (True) or `seconds` have passed (False)."""
    try:
        async with asyncio.timeout(seconds):
            await event.wait()
    except TimeoutError:
        return False
    return True
