"""Stops reach every scheduler replica's watchers: two feeds on one database (two replicas),
each with its own listener; a stop announced on one is streamed by both, at once."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from batchgate.services.common.db import Database
from batchgate.services.common.db.dialect import Listener
from batchgate.services.scheduler import closing_feed
from batchgate.services.scheduler.closing_feed import CLOSING_CHANNEL, ClosingFeed
from batchgate.services.scheduler.queue import Stopped
from tests.support import prepare_database


@contextlib.asynccontextmanager
async def replica(url: str) -> AsyncIterator[ClosingFeed]:
    db = Database(url)
    feed = ClosingFeed(db)
    listening = asyncio.create_task(Listener(db, CLOSING_CHANNEL, feed.on_notify).run())
    try:
        yield feed
    finally:
        listening.cancel()
        await asyncio.gather(listening, return_exceptions=True)
        await db.dispose()


async def stops_until(feed: ClosingFeed, last: str, seen: list[Stopped]) -> None:
    async for stopped in feed.watch():
        if stopped is not None:
            seen.append(stopped)
            if stopped.batch_id == last:
                return


async def test_a_stop_announced_on_one_replica_reaches_the_watchers_of_every_replica(
    database_url: str, db_kind: str
) -> None:
    await prepare_database(database_url)
    async with replica(database_url) as one, replica(database_url) as two:
        feeds = [one, two] if db_kind == "postgres" else [one]  # SQLite: a single scheduler process
        seen: list[list[Stopped]] = [[] for _ in feeds]
        watchers = [
            asyncio.create_task(stops_until(feed, "batch_expired", got))
            for feed, got in zip(feeds, seen, strict=True)
        ]
        for _ in range(100):  # until every listener is connected and hears a probe
            await one.announce(Stopped("probe", hard=False))
            await asyncio.sleep(0.05)
            if all(got for got in seen):
                break
        await one.announce(Stopped("batch_cancelled", hard=False))
        await one.announce(Stopped("batch_expired", hard=True))
        await asyncio.wait_for(asyncio.gather(*watchers), 5)
        for got in seen:
            assert [s for s in got if s.batch_id != "probe"] == [
                Stopped("batch_cancelled", hard=False),
                Stopped("batch_expired", hard=True),
            ]


@pytest.mark.parametrize("payload", ["", "1", "xbatch", "2batch"])
def test_a_foreign_notify_payload_is_ignored(payload: str) -> None:
    assert closing_feed._parse(payload) is None
    stopped = Stopped("batch_1", hard=True)
    assert closing_feed._parse(closing_feed._payload(stopped)) == stopped
