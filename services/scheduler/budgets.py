"""Per-key rate budgets for the whole deployment, granted to executors in small shares.

A provider key's `requests_per_minute` / `tokens_per_minute` is one pair of token buckets in
the database (`rate_budgets`), whatever the number of executors: each refills continuously at
its rate and banks at most a minute's worth (it starts full, like the providers' own
per-minute limits). An executor whose key runs short asks for a grant: what its waiting call
needs, plus a little ahead (`BudgetAsk.*_wanted`, about a second's worth). A grant is all of
what is needed, or nothing plus when to ask again, so no executor sits on part of a call's
budget while another waits for the rest. Granted units are spent, never returned: an
executor that dies holding some leaves them unused, which only errs on the safe side.

The key is named by a hash (`key_id`); the rates come with each ask from the executors'
own configuration (the scheduler may not have the providers' secrets to hash).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from batchgate.services.common.db import Database, rate_budgets


@dataclass(frozen=True)
class Ask:
    key_id: str
    requests_per_minute: float
    tokens_per_minute: float
    requests_needed: float
    requests_wanted: float
    tokens_needed: float
    tokens_wanted: float


@dataclass(frozen=True)
class Grant:
    key_id: str
    requests: float
    tokens: float
    retry_after_s: float


def refill(level: float, per_minute: float, elapsed_s: float) -> float:
    """A bucket's level after `elapsed_s`: continuous refill, at most a minute's worth."""
    return min(per_minute, level + max(elapsed_s, 0.0) * per_minute / 60)


def _share(level: float, per_minute: float, needed: float, wanted: float) -> tuple[float, float]:
    """(what a bucket at `level` grants, seconds until it could): all of `needed` or nothing.
    A call needing more than a minute's worth waits for a full bucket and takes all of it."""
    if per_minute <= 0 or wanted <= 0:
        return 0.0, 0.0
    needed = min(needed, per_minute)
    if level < needed:
        return 0.0, (needed - level) * 60 / per_minute
    return min(max(wanted, needed), level), 0.0


class Budgets:
    def __init__(self, db: Database, clock: Callable[[], float] = time.time) -> None:
        self._db = db
        self._clock = clock

    async def grant(self, asks: Sequence[Ask]) -> list[Grant]:
        """One transaction for every key asked for, locked in key order."""
        now = self._clock()
        grants: dict[str, Grant] = {}
        async with self._db.write() as conn:
            for ask in sorted(asks, key=lambda a: a.key_id):
                row = await rate_budgets.lock_bucket(
                    self._db,
                    conn,
                    key_id=ask.key_id,
                    requests_per_minute=ask.requests_per_minute,
                    tokens_per_minute=ask.tokens_per_minute,
                    now=now,
                )
                elapsed = now - row.updated_at
                requests = refill(row.requests, ask.requests_per_minute, elapsed)
                tokens = refill(row.tokens, ask.tokens_per_minute, elapsed)
                got_requests, wait_requests = _share(
                    requests, ask.requests_per_minute, ask.requests_needed, ask.requests_wanted
                )
                got_tokens, wait_tokens = _share(
                    tokens, ask.tokens_per_minute, ask.tokens_needed, ask.tokens_wanted
                )
                wait = max(wait_requests, wait_tokens)
                if wait > 0:
                    got_requests = got_tokens = 0.0
                got_requests = float(math.floor(got_requests))
                await rate_budgets.store_bucket(
                    conn,
                    key_id=ask.key_id,
                    requests_per_minute=ask.requests_per_minute,
                    tokens_per_minute=ask.tokens_per_minute,
                    requests=requests - got_requests,
                    tokens=tokens - got_tokens,
                    now=now,
                )
                grants[ask.key_id] = Grant(ask.key_id, got_requests, got_tokens, wait)
        return [grants[ask.key_id] for ask in asks]
