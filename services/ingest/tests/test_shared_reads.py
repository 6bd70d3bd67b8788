"""Identical reads share one fetch, and none is answered from a fetch that began before it."""

from __future__ import annotations

import asyncio

import pytest

from batchgate.services.ingest.shared_reads import SharedReads


class Source:
    """A value behind a slow read: each fetch sees the value as it was when the fetch began."""

    def __init__(self) -> None:
        self.value = 0
        self.fetches = 0
        self.release = asyncio.Event()

    async def fetch(self) -> int:
        self.fetches += 1
        seen = self.value
        await self.release.wait()
        return seen


async def test_concurrent_reads_share_one_fetch() -> None:
    reads: SharedReads[int] = SharedReads()
    source = Source()
    waiting = [asyncio.create_task(reads.read("k", source.fetch)) for _ in range(10)]
    await asyncio.sleep(0)
    source.release.set()
    assert await asyncio.gather(*waiting) == [0] * 10
    assert source.fetches == 1


async def test_a_read_that_arrives_during_a_fetch_waits_for_a_fresh_one() -> None:
    reads: SharedReads[int] = SharedReads()
    source = Source()
    early = asyncio.create_task(reads.read("k", source.fetch))
    await asyncio.sleep(0.01)  # the fetch began and saw 0
    source.value = 1  # a write answered before the next read was sent
    late = [asyncio.create_task(reads.read("k", source.fetch)) for _ in range(5)]
    other = asyncio.create_task(reads.read("other", source.fetch))
    await asyncio.sleep(0.01)
    source.release.set()
    assert await early == 0
    assert await asyncio.gather(*late) == [1] * 5
    assert await other == 1
    assert source.fetches == 3  # the first, one for all the late ones, one for the other key


async def test_errors_reach_every_caller_and_a_caller_leaving_stops_nothing() -> None:
    reads: SharedReads[int] = SharedReads()
    release = asyncio.Event()

    async def failing() -> int:
        await release.wait()
        raise LookupError("gone")

    leaving = asyncio.create_task(reads.read("k", failing))
    staying = asyncio.create_task(reads.read("k", failing))
    await asyncio.sleep(0)
    leaving.cancel()
    release.set()
    with pytest.raises(LookupError):
        await staying
    with pytest.raises(asyncio.CancelledError):
        await leaving
