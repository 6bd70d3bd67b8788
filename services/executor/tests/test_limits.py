"""Per-key budgets, the key pool and adaptive concurrency, on a clock the test moves."""

from __future__ import annotations

import asyncio

import pytest

from services.executor.limits import AdaptiveConcurrency, Key, KeyPool, TokenBucket
from services.executor.usage import estimate_tokens


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_bucket_starts_full_refills_per_minute_and_caps_at_a_minute() -> None:
    clock = Clock()
    bucket = TokenBucket(60, clock)  # one a second
    assert bucket.wait_s(60) == 0
    bucket.spend(60)
    assert bucket.wait_s(1) == pytest.approx(1.0)
    clock.now += 30
    assert bucket.wait_s(30) == 0 and bucket.wait_s(31) == pytest.approx(1.0)
    clock.now += 3600
    assert bucket.wait_s(60) == 0 and bucket.wait_s(1000) == 0  # never more than capacity asked


def test_a_debt_from_a_corrected_estimate_delays_the_next_call() -> None:
    clock = Clock()
    key = Key("k", None, TokenBucket(600, clock))  # 10 tokens a second
    key.spend(100)
    key.correct(estimated=100, actual=600)  # the answer used far more than estimated
    assert key.wait_s(clock.now, 10) == pytest.approx(1.0)
    key.correct(estimated=100, actual=0)  # no usage reported: nothing to settle
    assert key.wait_s(clock.now, 10) == pytest.approx(1.0)


def test_keys_rotate_and_a_resting_key_is_skipped() -> None:
    clock = Clock()
    pool = KeyPool.build(["a", "b", "c"], 0, 0, clock)
    assert [pool.try_take(0).secret for _ in range(4)] == ["a", "b", "c", "a"]
    pool.cool_down(pool.keys[1], 5)
    assert [pool.try_take(0).secret for _ in range(3)] == ["c", "a", "c"]
    clock.now += 5
    assert [pool.try_take(0).secret for _ in range(3)] == ["a", "b", "c"]


def test_requests_per_minute_budget_moves_to_other_keys_then_waits() -> None:
    clock = Clock()
    pool = KeyPool.build(["a", "b"], 2, 0, clock)  # two a minute per key
    taken = [pool.try_take(0) for _ in range(5)]
    assert [k.secret for k in taken[:4]] == ["a", "b", "a", "b"]
    assert taken[4] == pytest.approx(30.0)  # every key spent: the earliest refill


def test_token_budget_counts_the_estimate() -> None:
    clock = Clock()
    pool = KeyPool.build(["a"], 0, 1000, clock)
    assert isinstance(pool.try_take(800), Key)
    assert pool.try_take(400) == pytest.approx(12.0)  # 200 left, 200 more at 1000/60 a second


async def test_take_waits_for_a_key_to_come_back() -> None:
    pool = KeyPool.build(["a"], 0, 0)
    pool.cool_down(pool.keys[0], 0.2)
    key = await asyncio.wait_for(pool.take(0), 5)
    assert key.secret == "a"


def test_429_burst_halves_once_and_successes_grow_it_back() -> None:
    clock = Clock()
    limit = AdaptiveConcurrency(maximum=16, minimum=2, clock=clock)
    limit.in_flight = 10
    for _ in range(5):  # one burst
        limit.release(rate_limited=True)
    assert limit.limit == 8
    clock.now += 2
    limit.in_flight = 3
    limit.release(rate_limited=True)
    assert limit.limit == 4
    for _ in range(3):
        clock.now += 2
        limit.in_flight += 1
        limit.release(rate_limited=True)
    assert limit.limit == 2  # never below the floor
    limit.in_flight = 100
    for _ in range(60):
        limit.release()
    assert 9 < limit.limit <= 16  # +1 per round of `limit` successes
    for _ in range(500):
        limit.release()
    assert limit.limit == 16  # never above the ceiling


def test_a_fixed_limit_does_not_move() -> None:
    limit = AdaptiveConcurrency(maximum=4, adaptive=False)
    limit.in_flight = 2
    limit.release(rate_limited=True)
    assert limit.limit == 4


async def test_waiters_get_slots_in_order_as_the_limit_allows() -> None:
    limit = AdaptiveConcurrency(maximum=2)
    await limit.acquire()
    await limit.acquire()
    order: list[int] = []

    async def wait(n: int) -> None:
        await limit.acquire()
        order.append(n)

    waiters = [asyncio.create_task(wait(n)) for n in range(3)]
    await asyncio.sleep(0.01)
    assert order == [] and limit.in_flight == 2
    waiters[1].cancel()  # a cancelled waiter gives up its place
    limit.release()
    await asyncio.sleep(0.01)
    assert order == [0]
    limit.release()
    await asyncio.sleep(0.01)
    assert order == [0, 2] and limit.in_flight == 2


def test_token_estimate_counts_text_and_the_completion_allowance() -> None:
    body = {
        "messages": [
            {"role": "user", "content": "x" * 400},
            {
                "role": "user",
                "content": [{"type": "image_url", "image_url": {"url": "data:" + "A" * 10_000}}],
            },
        ],
        "max_tokens": 50,
    }
    assert 150 <= estimate_tokens(body) <= 160
    assert estimate_tokens({"input": ["abcd" * 10, "abcd"]}) == 12
