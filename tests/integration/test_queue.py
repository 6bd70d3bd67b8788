"""The scheduler's queue against real SQLite and PostgreSQL: priority and fairness ordering,
fencing tokens, rescue, cancel/expiry closing, several leasers at once, one maintenance leader.

These drive `batchgate.services.scheduler.queue.Queue` directly (no gRPC): ordering is easier to pin
down here than end to end, and the statements are exactly the ones the service runs.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import select, text, update

from batchgate.services.common.db import Database
from batchgate.services.common.db.dialect import LeaderLock
from batchgate.services.common.db.engine import IDLE_TRANSACTION_TIMEOUT_S
from batchgate.services.common.db.schema import batches, items
from batchgate.services.scheduler.maintenance import LEADER_LOCK_KEY
from batchgate.services.scheduler.queue import (
    CANDIDATE_BATCHES,
    Closing,
    Queue,
    Ref,
    Request,
    SessionLost,
    Stopped,
)
from tests.integration.seed import add_batch

TTL_S = 30.0


async def states(db: Database, batch_id: str) -> Counter[str]:
    async with db.read() as conn:
        rows = (await conn.execute(select(items.c.state).where(items.c.batch_id == batch_id))).scalars()
        return Counter(rows)


def per_batch(leases: list) -> Counter[str]:
    return Counter(lease.batch_id for lease in leases)


async def test_expedited_first_then_higher_integer_priority_then_the_rest(db: Database) -> None:
    await add_batch(db, "b_old", 4, age_s=1)
    await add_batch(db, "b_new", 4, age_s=2)
    await add_batch(db, "b_high", 4, priority=5, age_s=3)
    await add_batch(db, "b_expedited", 4, tier=1, age_s=4)
    queue = Queue(db, TTL_S)
    assert per_batch(await queue.lease("e1", 4)) == {"b_expedited": 4}
    assert per_batch(await queue.lease("e1", 4)) == {"b_high": 4}
    assert per_batch(await queue.lease("e1", 4)) == {"b_old": 2, "b_new": 2}
    assert per_batch(await queue.lease("e1", 5)) == {"b_old": 2, "b_new": 2}
    assert await queue.lease("e1", 4) == []


async def test_left_over_capacity_flows_to_the_next_priority(db: Database) -> None:
    await add_batch(db, "b_expedited", 3, tier=1)
    await add_batch(db, "b_standard", 10)
    leases = await Queue(db, TTL_S).lease("e1", 8)
    assert per_batch(leases) == {"b_expedited": 3, "b_standard": 5}
    assert [lease.index for lease in leases if lease.batch_id == "b_standard"] == [0, 1, 2, 3, 4]


async def test_a_large_old_batch_does_not_starve_a_small_new_one(db: Database) -> None:
    await add_batch(db, "b_large", 500, age_s=1)
    await add_batch(db, "b_small", 10, age_s=50)
    queue = Queue(db, TTL_S)
    assert per_batch(await queue.lease("e1", 12)) == {"b_large": 6, "b_small": 6}
    # The small batch runs dry; its unused share goes to the large one in the same call.
    assert per_batch(await queue.lease("e1", 12)) == {"b_large": 8, "b_small": 4}


async def test_projects_share_evenly_before_their_batches_do(db: Database) -> None:
    for i in range(3):
        await add_batch(db, f"b_a{i}", 100, project="proj-a", age_s=i)
    await add_batch(db, "b_b0", 100, project="proj-b", age_s=10)
    counts = per_batch(await Queue(db, TTL_S).lease("e1", 60))
    assert counts["b_b0"] == 30
    assert sum(counts[f"b_a{i}"] for i in range(3)) == 30
    assert all(counts[f"b_a{i}"] == 10 for i in range(3))


async def test_a_project_with_many_batches_does_not_crowd_out_another_projects_batch(db: Database) -> None:
    for i in range(CANDIDATE_BATCHES + 5):  # more than one lease looks at, all older
        await add_batch(db, f"b_a{i:03d}", 1, project="proj-a", age_s=i / 100)
    await add_batch(db, "b_b", 5, project="proj-b", age_s=100)
    counts = per_batch(await Queue(db, TTL_S).lease("e1", 10))
    assert counts["b_b"] == 5 and sum(counts.values()) == 10


async def test_fresh_fencing_tokens_and_a_dead_sessions_items_rescued(db: Database) -> None:
    await add_batch(db, "b1", 3)
    short = Queue(db, 0.2)
    first = await short.lease("e1", 1)
    assert [(lease.index, lease.attempt) for lease in first] == [(0, 1)]
    await short.lease("e3", 1)
    await asyncio.sleep(0.4)
    assert await short.heartbeat("e3")  # lapsed but not rescued yet: still current
    assert await short.rescue_expired() == 1  # e1 stopped beating: its item is queued again
    assert not await short.heartbeat("e1")  # ... and e1 hears its leases are gone
    with pytest.raises(SessionLost):  # an ended session never leases again
        await short.lease("e1", 1)
    assert await short.heartbeat("e3")
    again = await short.lease("e2", 5)
    assert sorted((lease.index, lease.attempt) for lease in again) == [(0, 2), (2, 1)]
    assert await states(db, "b1") == {"leased": 3}


async def test_a_session_with_nothing_leased_lapses_quietly(db: Database) -> None:
    queue = Queue(db, 0.1)
    await add_batch(db, "b1", 1)
    (lease,) = await queue.lease("e1", 1)
    assert await queue.release([Ref(lease.batch_id, lease.index, lease.attempt)]) == 1
    await asyncio.sleep(0.2)
    assert await queue.rescue_expired() == 0
    assert not await queue.heartbeat("e1")  # its row is gone; the next lease opens it again
    assert len(await queue.lease("e1", 1)) == 1 and await queue.heartbeat("e1")


async def test_a_repeated_call_gets_what_its_lost_answer_leased(db: Database) -> None:
    await add_batch(db, "b1", 10)
    queue = Queue(db, TTL_S)
    first = await queue.lease("e1", 3, Request("call-1"))
    again = await queue.lease("e1", 3, Request("call-1", retry=True))
    assert [(x.index, x.attempt) for x in again] == [(x.index, x.attempt) for x in first]
    assert await queue.release([Ref("b1", first[0].index, first[0].attempt)]) == 1
    assert len(await queue.lease("e1", 3, Request("call-1", retry=True))) == 2  # what is still its
    assert len(await queue.lease("e2", 3, Request("call-1", retry=True))) == 3  # another session: new
    assert await states(db, "b1") == {"leased": 5, "queued": 5}


async def test_outranking_work_is_leased_beyond_the_count(db: Database) -> None:
    await add_batch(db, "b_std", 10, age_s=1)
    queue = Queue(db, TTL_S)
    holding_standard = Request(outrank=(0, 0), outranking=200)
    assert await queue.lease("e1", 0, holding_standard) == []  # nothing outranks what it holds
    await add_batch(db, "b_high", 3, priority=2, age_s=2)
    await add_batch(db, "b_exp", 5, tier=1, age_s=3)
    assert per_batch(await queue.lease("e1", 0, holding_standard)) == {"b_exp": 5, "b_high": 3}
    assert per_batch(await queue.lease("e1", 2, holding_standard)) == {"b_std": 2}
    holding_expedited = Request(outrank=(1, 0), outranking=200)
    await add_batch(db, "b_exp2", 4, tier=1, age_s=4)
    assert await queue.lease("e1", 0, holding_expedited) == []  # same priority: not beyond the count
    assert per_batch(await queue.lease("e1", 1, Request(outrank=(0, 5), outranking=2))) == {"b_exp2": 3}


async def test_release_queues_items_again(db: Database) -> None:
    await add_batch(db, "b1", 3)
    queue = Queue(db, TTL_S)
    leases = await queue.lease("e1", 3)
    assert await queue.release([Ref(x.batch_id, x.index, x.attempt) for x in leases[:2]]) == 2
    assert await states(db, "b1") == {"queued": 2, "leased": 1}
    assert sorted(x.attempt for x in await queue.lease("e2", 3)) == [2, 2]


async def test_cancel_closes_queued_items_and_lets_leased_ones_finish(db: Database) -> None:
    await add_batch(db, "b1", 10)
    queue = Queue(db, TTL_S)
    await queue.lease("e1", 3)
    async with db.write() as conn:
        await conn.execute(
            update(batches).where(batches.c.id == "b1").values(status="cancelling", end_status="cancelled")
        )
    assert await queue.lease("e1", 10) == []  # a cancelling batch hands out nothing
    closed, settled = await queue.close_open(Closing("b1", "cancelled", hard=False))
    assert (closed, settled) == (7, False)
    assert await states(db, "b1") == {"cancelled": 7, "leased": 3}
    async with db.read() as conn:
        row = (await conn.execute(select(batches).where(batches.c.id == "b1"))).one()
        codes = set(
            (await conn.execute(select(items.c.error_code).where(items.c.state == "cancelled"))).scalars()
        )
    assert row.failed_count == 7 and row.end_status == "cancelled"
    assert codes == {"batch_cancelled"}
    assert await queue.close_open(Closing("b1", "cancelled", hard=False)) == (0, False)  # idempotent


async def test_batches_that_start_nothing_new_are_reported_stopped(db: Database) -> None:
    await add_batch(db, "running", 1)
    await add_batch(db, "cancelling", 1)
    await add_batch(db, "past-window", 1, window_s=-1)
    async with db.write() as conn:
        await conn.execute(update(batches).where(batches.c.id == "cancelling").values(status="cancelling"))
    queue = Queue(db, TTL_S)
    asked = ["running", "cancelling", "past-window", "unknown"]
    assert await queue.stopped(asked) == [
        Stopped("cancelling", hard=False),  # its running items finish
        Stopped("past-window", hard=True),  # its leases are closed: running items may stop
        Stopped("unknown", hard=True),
    ]
    assert await queue.stopped([]) == []


async def test_expiry_closes_queued_and_leased_items_and_keeps_finished_ones(db: Database) -> None:
    await add_batch(db, "b1", 6, window_s=0.5)
    queue = Queue(db, TTL_S)
    leases = await queue.lease("e1", 3)
    async with db.write() as conn:  # one finished before the deadline
        await conn.execute(
            update(items)
            .where(items.c.batch_id == "b1", items.c.idx == leases[0].index)
            .values(state="succeeded")
        )
        await conn.execute(update(batches).where(batches.c.id == "b1").values(completed_count=1))
    await asyncio.sleep(0.6)
    assert await queue.lease("e1", 10) == []  # past its window: nothing more is handed out
    assert [c.batch_id for c in await queue.closing_batches() if c.end == "expired" and c.hard] == ["b1"]
    assert await queue.close_open(Closing("b1", "expired", hard=True)) == (5, True)
    assert await states(db, "b1") == {"succeeded": 1, "expired": 5}
    assert await queue.stopped(["b1"]) == [Stopped("b1", hard=True)]  # executors drop what runs


async def test_a_batch_that_finished_before_its_deadline_is_not_marked_expired(db: Database) -> None:
    await add_batch(db, "b1", 1, window_s=0.2)
    async with db.write() as conn:
        await conn.execute(update(items).where(items.c.batch_id == "b1").values(state="succeeded"))
        await conn.execute(update(batches).where(batches.c.id == "b1").values(completed_count=1))
    await asyncio.sleep(0.3)
    assert await Queue(db, TTL_S).close_open(Closing("b1", "expired", hard=True)) == (0, True)
    async with db.read() as conn:
        assert (await conn.execute(select(batches.c.end_status))).scalar() is None


async def test_concurrent_leasers_never_hand_out_one_item_twice(database_url: str, db: Database) -> None:
    """Four "replicas", each with its own engine, lease until the queue is empty."""
    for i in range(3):
        await add_batch(db, f"b{i}", 400, project=f"proj-{i % 2}", age_s=i)
    replicas = [Database(database_url) for _ in range(4)]
    try:
        queues = [Queue(replica, TTL_S) for replica in replicas]

        async def drain(queue: Queue, name: str) -> list[tuple[str, int]]:
            taken: list[tuple[str, int]] = []
            while leases := await queue.lease(name, 37):
                taken += [(x.batch_id, x.index) for x in leases]
            return taken

        results = await asyncio.gather(*(drain(q, f"e{i}") for i, q in enumerate(queues)))
    finally:
        for replica in replicas:
            await replica.dispose()
    taken = [key for result in results for key in result]
    assert len(taken) == len(set(taken)) == 1200
    async with db.read() as conn:
        attempts = set((await conn.execute(select(items.c.attempt))).scalars())
    assert attempts == {1}


@pytest.fixture
async def two_locks(database_url: str, db: Database) -> AsyncIterator[tuple[LeaderLock, LeaderLock]]:
    """The maintenance lock as two replicas hold it: each through its own engine."""
    other = Database(database_url)
    first, second = LeaderLock(db, LEADER_LOCK_KEY, 1.0), LeaderLock(other, LEADER_LOCK_KEY, 1.0)
    try:
        yield first, second
    finally:
        await first.release()
        await second.release()
        await other.dispose()


@pytest.mark.postgres
@pytest.mark.parametrize("db_kind", ["postgres"], indirect=True)
async def test_only_one_replica_leads_maintenance(two_locks: tuple[LeaderLock, LeaderLock]) -> None:
    first, second = two_locks
    assert await first.held() is True
    assert await second.held() is False
    assert await first.held() is True  # a leader stays leader
    await first.release()  # the leader goes away (its session ends)
    assert await second.held() is True
    assert await first.held() is False


@pytest.mark.postgres
@pytest.mark.parametrize("db_kind", ["postgres"], indirect=True)
async def test_a_frozen_leaders_lock_lapses_with_its_idle_session(
    two_locks: tuple[LeaderLock, LeaderLock],
) -> None:
    """A leader that stops checking (a frozen process keeps its connection open) loses the lock
    once its session has idled past `idle_timeout_s`, and another replica leads."""
    frozen, second = two_locks
    assert frozen.idle_timeout_s == 30.0  # the floor, well above ten checks a second apart
    frozen.idle_timeout_s = 0.5
    assert await frozen.held() is True
    assert await second.held() is False
    await asyncio.sleep(1.5)
    assert await second.held() is True
    assert await frozen.held() is False  # resumed, it finds its session gone


@pytest.mark.postgres
@pytest.mark.parametrize("db_kind", ["postgres"], indirect=True)
async def test_sessions_end_a_transaction_left_waiting(db: Database) -> None:
    """A frozen process's open transaction (and its row locks) is ended by PostgreSQL."""
    async with db.read() as conn:
        timeout = (await conn.execute(text("SHOW idle_in_transaction_session_timeout"))).scalar()
    assert timeout == f"{IDLE_TRANSACTION_TIMEOUT_S:g}s"
