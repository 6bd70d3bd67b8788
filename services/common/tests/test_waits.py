"""`sleep_unless` ends on its event or its timeout, and a cancellation that arrives as the event
is set still stops the loop that sleeps (Python 3.11's `wait_for` swallowed it)."""

from __future__ import annotations

import asyncio

import pytest

from batchgate.services.common.waits import sleep_unless


async def test_it_says_whether_the_event_came_or_the_time_ran_out() -> None:
    event = asyncio.Event()
    assert await sleep_unless(event, 0.01) is False
    asyncio.get_running_loop().call_later(0.01, event.set)
    assert await sleep_unless(event, 5) is True


@pytest.mark.parametrize("turns", range(4))
async def test_a_cancel_that_races_the_event_stops_the_loop(turns: int) -> None:
    wake = asyncio.Event()

    async def deliver_until_cancelled() -> None:  # the shape of every loop that sleeps this way
        while True:
            wake.clear()
            await asyncio.sleep(0)
            await sleep_unless(wake, 0.05)

    loop_task = asyncio.create_task(deliver_until_cancelled())
    await asyncio.sleep(0.01)
    wake.set()  # work finished elsewhere, in the same moment as the stop
    for _ in range(turns):
        await asyncio.sleep(0)
    loop_task.cancel()
    done, _ = await asyncio.wait({loop_task}, timeout=1)
    assert done == {loop_task}, "the cancellation was swallowed: the loop runs on"
    assert loop_task.cancelled()
