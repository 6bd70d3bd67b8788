"""When an executor's upstream calls may start, and in which order waiting calls go.

- `Dispatcher`: every upstream call waits in one place for three things at once: a slot of the
  executor (`executor_concurrency` calls in flight), a slot of its provider (the provider's
  adaptive limit), and a key that may be used now. Waiting calls are served best rank first
  (priority tier, then integer priority, then the order the executor leased them in, so the
  scheduler's fairness within a priority carries through); a provider with no free slot or no
  usable key does not hold up the calls of other providers. Nothing waits in a FIFO
  elsewhere, so an expedited item leased behind hundreds of standard ones starts next.
- `AdaptiveLimit`: how many calls one provider gets at once. It starts small and doubles every
  round of successes until the provider first answers 429 (slow start), then remembers where
  429s began: a 429 lowers the limit to just below the concurrency the refused call was sent
  at (by 10% at least, by half at most), that level becomes the known-safe one, and the limit
  stays there, probing one step higher only every few seconds (doubling the step while probes
  pass). A provider that caps its concurrency is held at its capacity instead of being
  overrun every second; one that limits its rate without saying so is backed off from.
- `KeyPool`: the provider's keys in turn. A key is skipped while it rests (the provider said
  its window is spent) or while it has no budget: budgeted keys spend allowance granted by the
  scheduler (`Granter`), which holds each key's budget for the whole deployment.

Time comes from an injectable monotonic clock so the arithmetic can be tested directly.
"""

from __future__ import annotations

import asyncio
import hashlib
import heapq
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

Clock = Callable[[], float]
Rank = tuple[int, int, int]
"""(−tier, −priority, lease order): smaller runs first."""

SLOW_START = 8  # an adaptive limit's first value (at most its maximum)
BETA = 0.9  # a 429 lowers the limit to at most this share of it (and at least half of it)
PROBE_INTERVAL_S = 2.0  # at the known-safe level, try one step higher this often (or 2 calls' time)


def rank(tier: int, priority: int, order: int) -> Rank:
    return (-tier, -priority, order)


class AdaptiveLimit:
    """The concurrency one provider gets, between `minimum` and `maximum`."""

    def __init__(
        self, maximum: int, minimum: int = 1, adaptive: bool = True, clock: Clock = time.monotonic
    ) -> None:
        self.maximum = maximum
        self.minimum = minimum
        self.adaptive = adaptive
        self.limit = float(min(maximum, max(minimum, SLOW_START)) if adaptive else maximum)
        self.safe: float | None = None
        """The highest concurrency known to pass; None until the first 429."""
        self._clock = clock
        self._step = 1.0
        self._probe_at = clock()
        self._decreased_at = -math.inf
        self._call_s = 0.0  # moving average of a call's duration

    def room(self, in_flight: int) -> bool:
        return in_flight < int(self.limit)

    def succeeded(self, granted_at: float) -> None:
        if not self.adaptive:
            return
        now = self._clock()
        self._call_s += (now - granted_at - self._call_s) / 16
        if self.limit >= self.maximum:
            return
        if self.safe is None:  # slow start: +1 a success doubles the limit every round
            self.limit = min(float(self.maximum), self.limit + 1)
        elif self.limit < self.safe:  # back up to the known-safe level within a round or two
            self.limit = min(self.safe, self.limit + 1 / self.limit)
        elif now - self._probe_at >= max(PROBE_INTERVAL_S, 2 * self._call_s):
            self.safe = self.limit  # the last probe passed
            self.limit = min(float(self.maximum), self.limit + self._step)
            self._step *= 2
            self._probe_at = now

    def rate_limited(self, granted_at: float, concurrent: int) -> None:
        """A 429 for a call granted at `granted_at` with `concurrent` calls in flight (its own
        included). Calls sent before the last decrease say nothing about the new limit."""
        if not self.adaptive or granted_at < self._decreased_at:
            return
        now = self._clock()
        seen = float(max(self.minimum, concurrent - 1))  # the most that passed alongside it
        lowered = max(self.limit / 2, min(seen, self.limit * BETA), float(self.minimum))
        self.safe = min(self.limit, max(lowered, seen))
        self.limit = lowered
        self._decreased_at = now
        self._probe_at = now
        self._step = 1.0


def key_id(provider: str, secret: str) -> str:
    """Names a key to the scheduler (shared budgets) without revealing it."""
    return hashlib.sha256(f"{provider}\0{secret}".encode()).hexdigest()[:32]


@dataclass
class Key:
    """One API key of a provider: its rest, and the budget allowance it holds."""

    secret: str
    key_id: str
    requests_per_minute: float = 0.0
    tokens_per_minute: float = 0.0
    requests: float = 0.0
    """Granted requests not spent yet (budgeted keys)."""
    tokens: float = 0.0
    """Granted tokens not spent yet; negative after an answer used more than estimated."""
    resting_until: float = 0.0
    ask_after: float = 0.0
    """The scheduler said no more budget before this."""
    asking: bool = False
    """A grant request is on its way."""

    @property
    def budgeted(self) -> bool:
        return self.requests_per_minute > 0 or self.tokens_per_minute > 0

    def needs(self, tokens: int) -> tuple[float, float]:
        """(requests, tokens) of allowance missing for a call estimated at `tokens`."""
        requests = max(1 - self.requests, 0.0) if self.requests_per_minute > 0 else 0.0
        wanted = min(tokens, self.tokens_per_minute) if self.tokens_per_minute > 0 else 0
        return requests, max(wanted - self.tokens, 0.0)

    def spend(self, tokens: int) -> None:
        if self.requests_per_minute > 0:
            self.requests -= 1
        if self.tokens_per_minute > 0:
            self.tokens -= tokens

    def refund(self, tokens: int) -> None:
        """A call that was granted but never sent."""
        if self.requests_per_minute > 0:
            self.requests += 1
        if self.tokens_per_minute > 0:
            self.tokens += tokens

    def correct(self, estimated: int, actual: int) -> None:
        """Settle a call's token estimate against the usage its answer reported."""
        if self.tokens_per_minute > 0 and actual:
            self.tokens -= actual - estimated


class Granter(Protocol):
    def ask(self, key: Key, requests: float, tokens: float) -> None:
        """Ask for at least this much allowance for `key`: set `key.asking` now, and when the
        answer comes, add what was granted (or set `ask_after`), clear `asking`, and wake the
        dispatcher."""
        ...


@dataclass
class KeyPool:
    """Round-robin over keys that are neither resting nor out of budget."""

    keys: list[Key]
    granter: Granter | None = None
    clock: Clock = time.monotonic
    _next: int = 0

    @classmethod
    def build(
        cls,
        provider: str,
        secrets: Sequence[str],
        requests_per_minute: float = 0.0,
        tokens_per_minute: float = 0.0,
        granter: Granter | None = None,
        clock: Clock = time.monotonic,
    ) -> KeyPool:
        """Budgets are per key for the whole deployment; 0 means none."""
        keys = [
            Key(secret, key_id(provider, secret), requests_per_minute, tokens_per_minute)
            for secret in secrets or ("",)
        ]
        if granter is None and any(k.budgeted for k in keys):
            raise ValueError(f"provider {provider}: budgeted keys need a granter")
        return cls(keys, granter, clock)

    def try_take(self, tokens: int) -> Key | float:
        """The next usable key (its allowance spent), or the seconds until one may be
        (infinite while the only hope is a grant on its way, whose answer wakes the caller)."""
        now = self.clock()
        shortest = math.inf
        count = len(self.keys)
        for step in range(count):
            index = (self._next + step) % count
            key = self.keys[index]
            if key.resting_until > now:
                shortest = min(shortest, key.resting_until - now)
                continue
            requests, missing = key.needs(tokens) if key.budgeted else (0.0, 0.0)
            if not requests and not missing:
                key.spend(tokens)
                self._next = (index + 1) % count
                return key
            if key.asking:
                continue
            if key.ask_after > now:
                shortest = min(shortest, key.ask_after - now)
                continue
            assert self.granter is not None
            self.granter.ask(key, requests, missing)
        return shortest

    def rest(self, key: Key, seconds: float) -> None:
        key.resting_until = max(key.resting_until, self.clock() + seconds)


@dataclass
class Lane:
    """One provider's calls: its adaptive limit, its keys, and the calls waiting for both."""

    limit: AdaptiveLimit
    keys: KeyPool
    in_flight: int = 0
    _waiting: list[_Waiter] = field(default_factory=list)

    def _head(self) -> _Waiter | None:
        while self._waiting and self._waiting[0].future.done():  # cancelled while waiting
            heapq.heappop(self._waiting)
        return self._waiting[0] if self._waiting else None

    @property
    def waiting(self) -> int:
        return sum(1 for w in self._waiting if not w.future.done())


@dataclass
class Slot:
    """A granted call: hand it back with `Dispatcher.release`."""

    lane: Lane
    key: Key
    tokens: int
    concurrent: int
    """The provider's calls in flight when it was granted, this one included."""
    granted_at: float


@dataclass(order=True)
class _Waiter:
    rank: Rank
    tokens: int = field(compare=False)
    future: asyncio.Future[Slot] = field(compare=False)


class Dispatcher:
    def __init__(self, capacity: int, clock: Clock = time.monotonic) -> None:
        self.capacity = capacity
        self.in_flight = 0
        self._clock = clock
        self._lanes: list[Lane] = []
        self._timer: asyncio.TimerHandle | None = None
        self._holding = False

    def lane(self, limit: AdaptiveLimit, keys: KeyPool) -> Lane:
        lane = Lane(limit, keys)
        self._lanes.append(lane)
        return lane

    async def acquire(
        self,
        lane: Lane,
        rank: Rank,
        tokens: int,
        waiting: Callable[[asyncio.Future[Slot]], None] | None = None,
    ) -> Slot:
        """Wait for a slot of the executor and of `lane`, and a key that can pay `tokens`.
        `waiting` is handed the future waited on: cancelling it gives up the place in line."""
        future: asyncio.Future[Slot] = asyncio.get_running_loop().create_future()
        if waiting is not None:
            waiting(future)
        heapq.heappush(lane._waiting, _Waiter(rank, tokens, future))
        self.dispatch()
        try:
            return await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():  # granted just as we were cancelled
                slot = future.result()
                slot.key.refund(slot.tokens)
                self.release(slot, None)
            raise

    def release(self, slot: Slot, rate_limited: bool | None) -> None:
        """The call ended: answered 429 (`True`), succeeded (`False`), or neither (`None`:
        another error, or never sent), which tells the provider's limit nothing."""
        if rate_limited is True:
            slot.lane.limit.rate_limited(slot.granted_at, slot.concurrent)
        elif rate_limited is False:
            slot.lane.limit.succeeded(slot.granted_at)
        slot.lane.in_flight -= 1
        self.in_flight -= 1
        self.dispatch()

    def hold(self, holding: bool) -> None:
        """Grant no slot while `holding` (results takes no outcome: every answer kept meanwhile
        would run again after a crash); grant again once it is lifted."""
        self._holding = holding
        if not holding:
            self.dispatch()

    def dispatch(self) -> None:
        """Grant slots best rank first while the executor has room; wake up again when a
        key rests or a budget runs dry, at the earliest time one might be usable."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        soonest = math.inf
        blocked: set[int] = set()
        while not self._holding and self.in_flight < self.capacity:
            best: tuple[Lane, _Waiter] | None = None
            for number, lane in enumerate(self._lanes):
                if number in blocked or not lane.limit.room(lane.in_flight):
                    continue
                head = lane._head()
                if head is not None and (best is None or head.rank < best[1].rank):
                    best = lane, head
            if best is None:
                break
            lane, head = best
            key = lane.keys.try_take(head.tokens)
            if not isinstance(key, Key):
                blocked.add(self._lanes.index(lane))
                soonest = min(soonest, key)
                continue
            heapq.heappop(lane._waiting)
            lane.in_flight += 1
            self.in_flight += 1
            head.future.set_result(Slot(lane, key, head.tokens, lane.in_flight, self._clock()))
        if soonest < math.inf:
            self._timer = asyncio.get_running_loop().call_later(soonest, self.dispatch)
