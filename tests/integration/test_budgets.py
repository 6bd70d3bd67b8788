"""The scheduler's shared rate budgets against real SQLite and PostgreSQL, on a clock the test
moves: one bucket per key for the whole deployment, whoever asks, granted all or nothing."""

from __future__ import annotations

import asyncio

import pytest

from batchgate.services.common.db import Database
from batchgate.services.scheduler.budgets import Ask, Budgets


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def requests(key: str, needed: float, wanted: float, per_minute: float = 60) -> Ask:
    return Ask(key, per_minute, 0, needed, wanted, 0, 0)


async def test_a_key_starts_with_a_minute_refills_per_second_and_grants_all_or_nothing(db: Database) -> None:
    clock = Clock()
    budgets = Budgets(db, clock)
    (first,) = await budgets.grant([requests("k", 1, 50)])
    assert (first.requests, first.retry_after_s) == (50, 0)
    (rest,) = await budgets.grant([requests("k", 1, 50)])
    assert rest.requests == 10  # what is left of the minute's 60
    (empty,) = await budgets.grant([requests("k", 1, 5)])
    assert (empty.requests, empty.retry_after_s) == (0, pytest.approx(1.0))  # one a second
    clock.now += 2.5
    (refilled,) = await budgets.grant([requests("k", 1, 5)])
    assert refilled.requests == 2
    clock.now += 3600
    (capped,) = await budgets.grant([requests("k", 1, 500)])
    assert capped.requests == 60  # never more than a minute banked


async def test_tokens_and_requests_are_granted_together_or_not_at_all(db: Database) -> None:
    clock = Clock()
    budgets = Budgets(db, clock)
    both = Ask("k", 60, 600, 1, 1, 500, 500)
    (grant,) = await budgets.grant([both])
    assert (grant.requests, grant.tokens) == (1, 500)
    (short,) = await budgets.grant([both])  # 100 tokens left: neither is granted
    assert (short.requests, short.tokens) == (0, 0)
    assert short.retry_after_s == pytest.approx(40.0)  # 400 more tokens at 10 a second
    huge = Ask("k", 60, 600, 1, 1, 10_000, 10_000)  # more than a minute's worth: waits for a full bucket
    clock.now += 60
    (whole,) = await budgets.grant([huge])
    assert whole.tokens == 600


async def test_executors_asking_at_once_share_one_budget(db: Database) -> None:
    budgets = Budgets(db, Clock())
    grants = await asyncio.gather(
        *(budgets.grant([requests("shared", 1, 7), requests(f"own-{n}", 1, 7)]) for n in range(12))
    )
    shared = sum(g[0].requests for g in grants)
    assert shared == 60  # one minute's budget, however many executors asked
    assert all(g[1].requests == 7 for g in grants)  # other keys have their own
