"""The dispatcher's order, the adaptive limit, the key pool and its budget allowance, on a clock
the test moves (the dispatcher's own waits run on the event loop)."""

from __future__ import annotations

import asyncio
import math

import pytest

from batchgate.services.executor.limits import (
    PROBE_INTERVAL_S,
    SLOW_START,
    AdaptiveLimit,
    Dispatcher,
    Key,
    KeyPool,
    Slot,
    rank,
)
from batchgate.services.executor.usage import estimate_tokens


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Granter:
    """Grants what is asked for, when the test says so."""

    def __init__(self) -> None:
        self.asks: list[tuple[Key, float, float]] = []

    def ask(self, key: Key, requests: float, tokens: float) -> None:
        key.asking = True
        self.asks.append((key, requests, tokens))

    def answer(self, requests: float, tokens: float, retry_after_s: float = 0.0, now: float = 0.0) -> None:
        for key, _r, _t in self.asks:
            key.asking = False
            key.requests += requests
            key.tokens += tokens
            key.ask_after = now + retry_after_s
        self.asks.clear()


def test_slow_start_doubles_until_the_first_429_then_holds_below_it() -> None:
    clock = Clock()
    limit = AdaptiveLimit(maximum=64, clock=clock)
    assert limit.limit == SLOW_START
    for _ in range(SLOW_START):
        limit.succeeded(clock.now)
    assert limit.limit == 2 * SLOW_START
    for _ in range(100):
        limit.succeeded(clock.now)
    assert limit.limit == 64 and limit.safe is None
    limit.rate_limited(clock.now, concurrent=17)  # sent with 17 in flight: the capacity is 16
    assert (limit.safe, limit.limit) == (32, 32)  # at most halved per 429
    clock.now += 0.1
    limit.rate_limited(clock.now, concurrent=17)  # the next refused call, sent since
    assert (limit.safe, limit.limit) == (16, 16)
    late = clock.now - 0.001  # granted before that decrease: says nothing new
    clock.now += 0.5
    limit.rate_limited(late, concurrent=40)
    assert (limit.safe, limit.limit) == (16, 16)
    for _ in range(200):  # at the known-safe level: no probe before the interval
        clock.now += 0.001
        limit.succeeded(clock.now)
    assert limit.limit == 16


def test_probes_step_up_doubling_while_they_pass_and_restart_at_a_429() -> None:
    clock = Clock()
    limit = AdaptiveLimit(maximum=64, clock=clock)
    limit.rate_limited(clock.now, concurrent=9)  # 8 passed alongside it
    assert (limit.safe, limit.limit) == (8, pytest.approx(SLOW_START * 0.9))  # at least 10% lower
    for _ in range(40):  # back up to the safe level quickly
        limit.succeeded(clock.now)
    assert limit.limit == 8
    steps = []
    for _ in range(4):
        clock.now += PROBE_INTERVAL_S
        limit.succeeded(clock.now)
        steps.append(limit.limit)
    assert steps == [9, 11, 15, 23]  # steps 1, 2, 4, 8 while nothing answers 429
    limit.rate_limited(clock.now, concurrent=20)
    assert (limit.safe, limit.limit) == (19, 19)
    clock.now += PROBE_INTERVAL_S
    limit.succeeded(clock.now)
    assert limit.limit == 20  # the step starts at 1 again


def test_the_limit_stays_between_floor_and_ceiling_and_a_fixed_one_does_not_move() -> None:
    clock = Clock()
    limit = AdaptiveLimit(maximum=16, minimum=2, clock=clock)
    for _ in range(5):
        clock.now += 1
        limit.rate_limited(clock.now, concurrent=1)
    assert limit.limit == 2
    fixed = AdaptiveLimit(maximum=4, adaptive=False, clock=clock)
    assert fixed.limit == 4
    fixed.rate_limited(clock.now, concurrent=4)
    assert fixed.limit == 4


def test_keys_rotate_and_a_resting_key_is_skipped() -> None:
    clock = Clock()
    pool = KeyPool.build("p", ["a", "b", "c"], clock=clock)
    assert [pool.try_take(0).secret for _ in range(4)] == ["a", "b", "c", "a"]  # type: ignore[union-attr]
    pool.rest(pool.keys[1], 5)
    assert [pool.try_take(0).secret for _ in range(3)] == ["c", "a", "c"]  # type: ignore[union-attr]
    clock.now += 5
    assert [pool.try_take(0).secret for _ in range(3)] == ["a", "b", "c"]  # type: ignore[union-attr]
    for key in pool.keys:
        pool.rest(key, 7)
    assert pool.try_take(0) == pytest.approx(7.0)


def test_a_budgeted_key_asks_once_and_spends_what_it_was_granted() -> None:
    clock = Clock()
    granter = Granter()
    pool = KeyPool.build(
        "p", ["a"], requests_per_minute=60, tokens_per_minute=6000, granter=granter, clock=clock
    )
    assert pool.try_take(100) == math.inf  # nothing granted yet: asked, waiting for the answer
    assert pool.try_take(100) == math.inf and len(granter.asks) == 1  # one ask in flight
    (key, requests, tokens) = granter.asks[0]
    assert (requests, tokens) == (1, 100)
    granter.answer(requests=2, tokens=150)
    assert isinstance(pool.try_take(100), Key)
    assert pool.try_take(100) == math.inf  # 50 tokens left: asks for the 50 missing
    assert granter.asks[-1][1:] == (0, 50)
    granter.answer(requests=0, tokens=0, retry_after_s=3, now=clock.now)
    assert pool.try_take(100) == pytest.approx(3.0)  # told when to ask again
    key.correct(estimated=100, actual=600)  # an answer used far more than estimated: a debt
    assert key.needs(100) == (0, 550)


def test_key_ids_name_keys_without_revealing_them() -> None:
    pool = KeyPool.build("p", ["sk-secret-1", "sk-secret-2"])
    ids = [k.key_id for k in pool.keys]
    assert len(set(ids)) == 2 and not any("secret" in i for i in ids)
    assert KeyPool.build("other", ["sk-secret-1"]).keys[0].key_id not in ids
    with pytest.raises(ValueError, match="granter"):
        KeyPool.build("p", ["a"], requests_per_minute=10)


async def _granted(dispatcher: Dispatcher, lane: object, order: list[str], name: str, r: tuple) -> Slot:
    slot = await dispatcher.acquire(lane, r, 0)  # type: ignore[arg-type]
    order.append(name)
    return slot


async def test_waiting_calls_are_served_best_rank_first() -> None:
    dispatcher = Dispatcher(capacity=100)
    lane = dispatcher.lane(AdaptiveLimit(2, adaptive=False), KeyPool.build("p", ["k"]))
    order: list[str] = []
    running = [await dispatcher.acquire(lane, rank(0, 0, n), 0) for n in range(2)]
    waiters = {
        name: asyncio.create_task(_granted(dispatcher, lane, order, name, r))
        for name, r in [
            ("standard-early", rank(0, 0, 2)),
            ("standard-late", rank(0, 0, 3)),
            ("priority-5", rank(0, 5, 4)),
            ("expedited", rank(1, 0, 5)),
            ("cancelled", rank(1, 9, 6)),
        ]
    }
    await asyncio.sleep(0.01)
    waiters["cancelled"].cancel()  # a cancelled waiter gives up its place
    for slot in running:
        dispatcher.release(slot, False)
    await asyncio.sleep(0.01)
    assert order == ["expedited", "priority-5"] and lane.in_flight == 2
    for name in order[:]:
        dispatcher.release(waiters[name].result(), None)
        await asyncio.sleep(0.01)
    assert order == ["expedited", "priority-5", "standard-early", "standard-late"]


async def test_a_full_provider_does_not_hold_up_another_but_the_executor_cap_holds_both() -> None:
    dispatcher = Dispatcher(capacity=3)
    busy = dispatcher.lane(AdaptiveLimit(1, adaptive=False), KeyPool.build("busy", ["k"]))
    free = dispatcher.lane(AdaptiveLimit(10, adaptive=False), KeyPool.build("free", ["k"]))
    first = await dispatcher.acquire(busy, rank(1, 0, 0), 0)
    blocked = asyncio.create_task(dispatcher.acquire(busy, rank(1, 0, 1), 0))
    others = [await dispatcher.acquire(free, rank(0, 0, n), 0) for n in range(2)]
    assert dispatcher.in_flight == 3
    last = asyncio.create_task(dispatcher.acquire(free, rank(0, 0, 9), 0))
    await asyncio.sleep(0.01)
    assert not blocked.done() and not last.done()  # the executor's cap: 3 calls at once
    dispatcher.release(first, False)  # the busy provider's slot frees: its (better) waiter goes
    await asyncio.sleep(0.01)
    assert blocked.done() and not last.done()
    dispatcher.release(others[0], False)
    await asyncio.sleep(0.01)
    assert last.done()


async def test_a_resting_key_or_a_grant_wakes_the_waiting_call() -> None:
    dispatcher = Dispatcher(capacity=10)
    keys = KeyPool.build("p", ["k"])
    lane = dispatcher.lane(AdaptiveLimit(10, adaptive=False), keys)
    keys.rest(keys.keys[0], 0.2)
    slot = await asyncio.wait_for(dispatcher.acquire(lane, rank(0, 0, 0), 0), 5)  # the timer wakes it
    assert slot.key.secret == "k"

    granter = Granter()
    budgeted = KeyPool.build("q", ["b"], requests_per_minute=60, granter=granter)
    lane = dispatcher.lane(AdaptiveLimit(10, adaptive=False), budgeted)
    waiting = asyncio.create_task(dispatcher.acquire(lane, rank(0, 0, 1), 0))
    await asyncio.sleep(0.01)
    assert not waiting.done() and len(granter.asks) == 1
    granter.answer(requests=1, tokens=0)
    dispatcher.dispatch()  # what the budget client does when the answer arrives
    await asyncio.wait_for(waiting, 5)
    assert budgeted.keys[0].requests == 0


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
    # The output bound is read as budget holds read it: a positive integer, the first one set.
    assert estimate_tokens({"max_tokens": True}) == 1
    assert estimate_tokens({"max_completion_tokens": "x", "max_tokens": 50}) == 51
