"""How fast one executor may call one provider: per-key budgets, a key pool, and a
concurrency limit that adapts to the upstream.

- `TokenBucket`: a per-minute budget refilled continuously (requests or tokens). It starts
  full, so a minute's budget may go at once, like the providers' own per-minute limits.
- `KeyPool`: the provider's keys, taken round-robin; a key is skipped while it rests after a
  429 (`cool_down`) or while its budgets cannot pay for the call. Callers queue in order
  behind one lock, so waiting for budget costs one timer, not one per waiting item.
- `AdaptiveConcurrency`: AIMD. A 429 halves the limit (once per burst: 429s that arrive
  within one cool-off period count once); every success adds 1/limit, so the limit grows by
  one per round of successes, back up to the configured maximum.

Time comes from an injectable monotonic clock so the arithmetic can be tested directly.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

Clock = Callable[[], float]

DECREASE_COOLOFF_S = 1.0  # 429s closer together than this are one burst: one decrease


class TokenBucket:
    """`per_minute` units a minute, refilled continuously; at most a minute's worth banked."""

    def __init__(self, per_minute: float, clock: Clock) -> None:
        self.capacity = per_minute
        self._rate = per_minute / 60.0
        self._level = per_minute
        self._clock = clock
        self._at = clock()

    def _refill(self) -> None:
        now = self._clock()
        self._level = min(self.capacity, self._level + (now - self._at) * self._rate)
        self._at = now

    def wait_s(self, amount: float) -> float:
        """Seconds until `amount` (capped at the capacity) can be paid; 0 when it can now."""
        self._refill()
        missing = min(amount, self.capacity) - self._level
        return max(missing / self._rate, 0.0)

    def spend(self, amount: float) -> None:
        """Pay `amount` (negative refunds); the level may go below zero (a debt)."""
        self._refill()
        self._level = min(self.capacity, self._level - amount)


@dataclass
class Key:
    """One API key of a provider, with its budgets and rest period."""

    secret: str
    requests: TokenBucket | None
    tokens: TokenBucket | None
    resting_until: float = 0.0

    def wait_s(self, now: float, tokens: int) -> float:
        waits = [self.resting_until - now]
        if self.requests is not None:
            waits.append(self.requests.wait_s(1))
        if self.tokens is not None and tokens:
            waits.append(self.tokens.wait_s(tokens))
        return max(max(waits), 0.0)

    def spend(self, tokens: int) -> None:
        if self.requests is not None:
            self.requests.spend(1)
        if self.tokens is not None and tokens:
            self.tokens.spend(tokens)

    def correct(self, estimated: int, actual: int) -> None:
        """Settle a call's token estimate against the usage the answer reported."""
        if self.tokens is not None and actual:
            self.tokens.spend(actual - estimated)


@dataclass
class KeyPool:
    """Round-robin over keys that are neither resting nor out of budget."""

    keys: list[Key]
    clock: Clock = time.monotonic
    _next: int = 0
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    @classmethod
    def build(
        cls,
        secrets: Sequence[str],
        requests_per_minute: float,
        tokens_per_minute: float,
        clock: Clock = time.monotonic,
    ) -> KeyPool:
        """Budgets of 0 mean unlimited."""
        keys = [
            Key(
                secret,
                TokenBucket(requests_per_minute, clock) if requests_per_minute > 0 else None,
                TokenBucket(tokens_per_minute, clock) if tokens_per_minute > 0 else None,
            )
            for secret in secrets or ("",)
        ]
        return cls(keys, clock)

    @property
    def unlimited(self) -> bool:
        return all(k.requests is None and k.tokens is None for k in self.keys)

    def try_take(self, tokens: int) -> Key | float:
        """The next usable key (its budgets spent), or the seconds until one may be."""
        now = self.clock()
        shortest = float("inf")
        count = len(self.keys)
        for step in range(count):
            index = (self._next + step) % count
            key = self.keys[index]
            wait = key.wait_s(now, tokens)
            if wait <= 0:
                key.spend(tokens)
                self._next = (index + 1) % count
                return key
            shortest = min(shortest, wait)
        return shortest

    async def take(self, tokens: int) -> Key:
        """Wait for a usable key; callers are served in arrival order."""
        if not self._lock.locked():  # nobody waiting: no need to queue
            found = self.try_take(tokens)
            if isinstance(found, Key):
                return found
        async with self._lock:
            while True:
                found = self.try_take(tokens)
                if isinstance(found, Key):
                    return found
                await asyncio.sleep(found)

    def cool_down(self, key: Key, seconds: float) -> None:
        key.resting_until = max(key.resting_until, self.clock() + seconds)


class AdaptiveConcurrency:
    """A semaphore whose size moves between `minimum` and `maximum` (AIMD on 429s)."""

    def __init__(
        self, maximum: int, minimum: int = 1, adaptive: bool = True, clock: Clock = time.monotonic
    ) -> None:
        self.maximum = maximum
        self.minimum = minimum
        self.adaptive = adaptive
        self.limit = float(maximum)
        self.in_flight = 0
        self._clock = clock
        self._last_decrease = -DECREASE_COOLOFF_S
        self._waiters: deque[asyncio.Future[None]] = deque()

    def _free(self) -> bool:
        return self.in_flight < int(self.limit)

    async def acquire(self) -> None:
        if self._free() and not self._waiters:
            self.in_flight += 1
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self._release_slot()  # granted just as we were cancelled: hand it on
            else:
                with contextlib.suppress(ValueError):
                    self._waiters.remove(waiter)
            raise

    def release(self, rate_limited: bool = False) -> None:
        """Give the slot back, telling whether the call was answered 429."""
        if self.adaptive:
            if rate_limited:
                now = self._clock()
                if now - self._last_decrease >= DECREASE_COOLOFF_S:
                    self.limit = max(float(self.minimum), self.limit / 2)
                    self._last_decrease = now
            elif self.limit < self.maximum:
                self.limit = min(float(self.maximum), self.limit + 1 / self.limit)
        self._release_slot()

    def _release_slot(self) -> None:
        self.in_flight -= 1
        while self._waiters and self._free():
            waiter = self._waiters.popleft()
            if not waiter.done():
                self.in_flight += 1
                waiter.set_result(None)
