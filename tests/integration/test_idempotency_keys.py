"""IdempotencyKeys on a real database (SQLite and PostgreSQL): claims, waits, take-overs."""

from __future__ import annotations

import asyncio
import time

import pytest
from sqlalchemy import select, update

from batchgate.services.common.db import Database
from batchgate.services.common.db.schema import idempotency_keys
from batchgate.services.common.errors import ApiError
from batchgate.services.ingest.idempotency import Claim, IdempotencyKeys

TTL_S = 86400.0
STALE_S = 30.0


async def test_a_second_create_waits_for_the_first_and_gets_its_batch(db: Database) -> None:
    keys = IdempotencyKeys(db, TTL_S, STALE_S)
    first = await keys.claim("proj", "k", "digest")
    assert isinstance(first, Claim)
    waiting = asyncio.create_task(keys.claim("proj", "k", "digest"))
    await asyncio.sleep(0.3)
    assert not waiting.done()  # the first create is still running
    async with db.write() as conn:
        await first.bind(conn, "batch_1")
    assert await asyncio.wait_for(waiting, 10) == "batch_1"


async def test_concurrent_claims_give_the_key_to_exactly_one(db: Database) -> None:
    keys = IdempotencyKeys(db, TTL_S, STALE_S)
    outcomes = await asyncio.gather(
        *(keys.claim("proj", "race", "d", wait_s=0.5) for _ in range(5)), return_exceptions=True
    )
    claims = [o for o in outcomes if isinstance(o, Claim)]
    assert len(claims) == 1
    # The others waited for the first, which never finished: 409, and nothing of theirs stored.
    assert all(isinstance(o, ApiError) and o.status == 409 for o in outcomes if o not in claims)


async def test_a_released_key_is_free_and_a_different_body_is_422(db: Database) -> None:
    keys = IdempotencyKeys(db, TTL_S, STALE_S)
    claim = await keys.claim("proj", "k", "one")
    assert isinstance(claim, Claim)
    with pytest.raises(ApiError) as caught:
        await keys.claim("proj", "k", "two", wait_s=0)
    assert (caught.value.status, caught.value.code) == (422, "idempotency_key_reused")
    await keys.release(claim)
    assert isinstance(await keys.claim("proj", "k", "two", wait_s=0), Claim)
    assert isinstance(await keys.claim("other-project", "k", "one", wait_s=0), Claim)


async def test_a_crashed_creates_claim_is_taken_over_and_swept(db: Database) -> None:
    keys = IdempotencyKeys(db, TTL_S, STALE_S)
    assert isinstance(await keys.claim("proj", "crashed", "d"), Claim)
    assert isinstance(await keys.claim("proj", "old", "d"), Claim)
    async with db.write() as conn:
        await conn.execute(update(idempotency_keys).values(created_at=time.time() - STALE_S - 1))
    assert isinstance(await keys.claim("proj", "crashed", "d", wait_s=0), Claim)  # no waiting on the dead
    assert await keys.sweep() == 1  # "old"; "crashed" was just claimed again
    async with db.read() as conn:
        left = (await conn.execute(select(idempotency_keys.c.key))).scalars().all()
    assert left == ["crashed"]


async def test_bound_keys_are_kept_for_their_lifetime_then_swept(db: Database) -> None:
    keys = IdempotencyKeys(db, TTL_S, STALE_S)
    claim = await keys.claim("proj", "k", "d")
    assert isinstance(claim, Claim)
    async with db.write() as conn:
        await claim.bind(conn, "batch_1")
        await conn.execute(update(idempotency_keys).values(created_at=time.time() - STALE_S - 1))
    assert await keys.sweep() == 0
    assert await keys.claim("proj", "k", "d") == "batch_1"
    async with db.write() as conn:
        await conn.execute(update(idempotency_keys).values(created_at=time.time() - TTL_S - 1))
    assert await keys.sweep() == 1
