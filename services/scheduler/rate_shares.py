"""Per-project shares of the providers' request budgets, applied as items are leased.

A project's policy may give it a share (0–1, `batchgate projects set-policy --rate-share`) of
each provider's deployment-wide `requests_per_minute` (per key, times the provider's keys).
Leasing then draws the project's items from a bucket of its own at that rate (a row of
`rate_budgets` named `share:<project>:<provider>`, refilled continuously, banking at most a
minute's worth, like the providers' own buckets), so one team cannot take more than its share
of a provider however much it queues; the provider's own budget still binds everyone. An item
leased is one request (retries and fallbacks beyond it are not counted against the share).
Projects without a share, and providers without a request budget, are not limited here.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from batchgate.services.common.access_policy import Policy
from batchgate.services.common.config import Settings
from batchgate.services.common.db import Connection, Database, projects, rate_budgets
from batchgate.services.scheduler.budgets import refill

POLICY_CACHE_S = 5.0
"""How long a project's share is remembered (a policy change reaches leasing this late)."""

T = TypeVar("T")


class RateShares:
    def __init__(self, db: Database, settings: Settings) -> None:
        self._db = db
        self._settings = settings
        self._shares: dict[str, tuple[float | None, float]] = {}

    async def _share(self, conn: Connection, project_id: str) -> float | None:
        cached = self._shares.get(project_id)
        if cached is not None and cached[1] > time.monotonic():
            return cached[0]
        share = Policy.from_json(await projects.project_policy(conn, project_id)).rate_share
        self._shares[project_id] = (share, time.monotonic() + POLICY_CACHE_S)
        return share

    def _provider_rate(self, model: str) -> tuple[str, float] | None:
        """(provider, its requests per minute for the whole deployment) serving `model`."""
        config = self._settings.model(model)
        provider = self._settings.provider(config.provider) if config is not None else None
        if provider is None or provider.requests_per_minute <= 0:
            return None
        return provider.name, float(provider.requests_per_minute * max(len(provider.api_keys), 1))

    async def within_share(
        self,
        conn: Connection,
        *,
        project_id: str,
        model: str,
        wanted: int,
        now: float,
        lease: Callable[[int], Awaitable[list[T]]],
    ) -> list[T]:
        """`lease(n)` for as many of `wanted` items as the project's share allows now, in the
        caller's (leasing) transaction; the bucket is debited by what was leased."""
        share = await self._share(conn, project_id)
        rate = self._provider_rate(model) if share is not None else None
        if share is None or rate is None:
            return await lease(wanted)
        provider, per_minute = rate
        key_id = f"share:{project_id}:{provider}"
        allowed_rate = share * per_minute
        row: Any = await rate_budgets.lock_bucket(
            self._db, conn, key_id=key_id, requests_per_minute=allowed_rate, tokens_per_minute=0.0, now=now
        )
        level = refill(row.requests, allowed_rate, now - row.updated_at)
        allowed = min(wanted, math.floor(level))
        leased = await lease(allowed) if allowed > 0 else []
        await rate_budgets.store_bucket(
            conn,
            key_id=key_id,
            requests_per_minute=allowed_rate,
            tokens_per_minute=0.0,
            requests=level - len(leased),
            tokens=0.0,
            now=now,
        )
        return leased
