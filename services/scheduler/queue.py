"""The scheduler's queue: lease, release, executor sessions and the rescue of a dead
session's items, and closing the open items of cancelled and expired batches. The statements
are `batchgate.services.common.db.queue`; this module holds the rules.

A lease belongs to the executor session that took it (`items.leased_by`): it lasts as long
as the session, which the executor keeps alive with heartbeats every few seconds, however many
items it holds (one row updated, not one per item). Maintenance ends a lapsed session and
queues its items again in one transaction, so a dead executor's work runs again a lease time
after its last heartbeat. An ended session never comes back: its heartbeats are answered "not
alive" and its lease calls refused (`SessionLost`), so an executor that was only cut off drops
what it held and carries on under a new session.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from batchgate.services.common.db import Database, batches, lease_cursors, projects, queue
from batchgate.services.common.db.dialect import notify
from batchgate.services.common.db.queue import Ref
from batchgate.services.common.states import BatchStatus, ItemErrorCode, ItemState
from batchgate.services.scheduler.candidates import CandidateCache
from batchgate.services.scheduler.fairness import Candidate, allocate, top_group
from batchgate.services.scheduler.rate_shares import RateShares
from batchgate.services.scheduler.work_signal import WORK_CHANNEL, WorkSignal

__all__ = ["Closing", "Lease", "Queue", "Ref", "Request", "SessionLost", "Stopped"]

CANDIDATE_BATCHES = 200
LEASE_ROUNDS = 3
LAPSED_MEMORY_S = 86_400.0  # an ended session is remembered (refused) this long

CLOSE_CODES = {
    BatchStatus.CANCELLED: (
        ItemErrorCode.BATCH_CANCELLED,
        "This request was not executed because the batch was cancelled.",
    ),
    BatchStatus.EXPIRED: (
        ItemErrorCode.BATCH_EXPIRED,
        "This request could not be executed before the completion window expired.",
    ),
}
REVOKED_CODE = (
    ItemErrorCode.CREDENTIAL_REVOKED,
    "This request was not executed because the API key that created the batch was revoked or expired.",
)


@dataclass(frozen=True, kw_only=True)
class Lease:
    batch_id: str
    index: int
    attempt: int
    custom_id: str
    body: bytes
    traceparent: str | None
    endpoint: str
    model: str
    project_id: str
    tier: int
    priority: int
    batch_created_at: float
    expires_at: float
    allowed_models: str | None = None
    """The batch's `allowed_models` (JSON list), or None: any model."""


@dataclass(frozen=True)
class Request:
    """What a lease call asks beyond a count: its name, whether it repeats a call that got no
    answer, and the priority held work is waiting at (`outrank`), above which up to
    `outranking` more items are leased."""

    request_id: str = ""
    retry: bool = False
    outrank: tuple[int, int] | None = None
    outranking: int = 0


@dataclass(frozen=True)
class Closing:
    """A batch whose open items must be closed: `end` is how they end (cancelled|expired);
    `hard` also closes the leased ones (its window passed: late results are refused)."""

    batch_id: str
    end: BatchStatus
    hard: bool
    revoked: bool = False
    """Its key was revoked or expired: items close with `credential_revoked`."""


@dataclass(frozen=True)
class Stopped:
    """A batch that starts no new item; `hard`: its leased items are no longer current either
    (its window passed, or it ended)."""

    batch_id: str
    hard: bool


class SessionLost(Exception):
    """The executor's session lapsed and its leases were taken back: it must open a new one."""


@dataclass(frozen=True)
class _Runnable:
    candidate: Candidate
    endpoint: str
    model: str
    expires_at: float
    allowed_models: str | None


def _outranks(candidate: Candidate, outrank: tuple[int, int] | None) -> bool:
    return outrank is not None and (candidate.tier, candidate.priority) > outrank


def _lease(row: Any, runnable: _Runnable) -> Lease:
    candidate = runnable.candidate
    return Lease(
        batch_id=candidate.batch_id,
        index=row.idx,
        attempt=row.attempt,
        custom_id=row.custom_id,
        body=row.body,
        traceparent=row.traceparent,
        endpoint=runnable.endpoint,
        model=runnable.model,
        project_id=candidate.project_id,
        tier=candidate.tier,
        priority=candidate.priority,
        batch_created_at=candidate.created_at,
        expires_at=runnable.expires_at,
        allowed_models=runnable.allowed_models,
    )


class Queue:
    def __init__(
        self,
        db: Database,
        lease_ttl_s: float,
        shares: RateShares | None = None,
        signal: WorkSignal | None = None,
    ) -> None:
        """`signal` is woken whenever work appears: the candidate batches are re-read only
        then (without one, at every lease)."""
        self._db = db
        self._ttl = lease_ttl_s
        self._rotation = 0
        self._shares = shares
        """Projects' shares of the providers' request budgets (None: no project is limited)."""
        self._candidates = CandidateCache(signal, self._runnable)

    @property
    def lease_ttl_s(self) -> float:
        return self._ttl

    async def _runnable(self) -> dict[str, _Runnable]:
        """The batches a lease may draw from, at most CANDIDATE_BATCHES of them."""
        async with self._db.read() as conn:
            rows = await queue.runnable(conn, time.time(), CANDIDATE_BATCHES)
        return {
            r.id: _Runnable(
                Candidate(r.id, r.project_id, r.priority_tier, r.priority, r.created_at),
                r.endpoint,
                r.model or "",
                r.expires_at,
                r.allowed_models,
            )
            for r in rows
        }

    async def lease(
        self,
        executor_id: str,
        max_items: int,
        request: Request = Request(),
    ) -> list[Lease]:
        """Lease up to `max_items` items to the session `executor_id` (opened or kept alive
        here; `SessionLost` when it ended): highest priority first, fair within a priority.
        `request` names the call (a repeat collects what its lost answer held) and may ask
        for outranking work beyond `max_items`."""
        now = time.time()
        if request.retry and request.request_id:
            found = await self._leased_by_request(executor_id, request.request_id)
            if found:
                return found
        runnable = await self._candidates.get()
        best = top_group([r.candidate for r in runnable.values()])
        if not best or (max_items <= 0 and not _outranks(best[0], request.outrank)):
            return []
        self._rotation += 1
        async with self._db.write() as conn:
            if not await queue.keep_session(self._db, conn, executor_id, now, self._ttl):
                raise SessionLost(executor_id)
            return await self._lease_rounds(conn, runnable, executor_id, max_items, request, now)

    async def _lease_rounds(
        self,
        conn: Any,
        runnable: dict[str, _Runnable],
        executor_id: str,
        max_items: int,
        request: Request,
        now: float,
    ) -> list[Lease]:
        """Up to LEASE_ROUNDS rounds over the highest-priority group, each batch's share leased;
        a batch that ran dry leaves the next rounds to the others."""
        leased: list[Lease] = []
        remaining = max_items
        extra = request.outranking if request.outrank is not None else 0
        for _ in range(LEASE_ROUNDS):
            group = top_group([r.candidate for r in runnable.values()])
            if not group:
                break
            capacity = remaining + (extra if _outranks(group[0], request.outrank) else 0)
            if capacity <= 0:
                break
            for candidate, share in allocate(group, capacity, self._rotation):
                info = runnable[candidate.batch_id]

                async def take(count: int, batch_id: str = candidate.batch_id) -> list[Any]:
                    rows = await queue.lease_from(
                        self._db, conn, batch_id, count, executor_id, request.request_id, now
                    )
                    if len(rows) < count:  # ran dry, or stopped running
                        self._candidates.drop(batch_id)
                    return rows

                if self._shares is None:
                    rows = await take(share)
                else:
                    rows = await self._shares.within_share(
                        conn,
                        project_id=candidate.project_id,
                        model=info.model,
                        wanted=share,
                        now=now,
                        lease=take,
                    )
                leased += [_lease(r, info) for r in sorted(rows, key=lambda r: r.idx)]
                regular = min(len(rows), remaining)
                remaining -= regular
                extra -= len(rows) - regular
                if len(rows) < share:
                    del runnable[candidate.batch_id]
        return leased

    async def _leased_by_request(self, executor_id: str, request_id: str) -> list[Lease]:
        """What the call `request_id` leased to the session and is still leased to it."""
        async with self._db.read() as conn:
            rows = await queue.leased_by_request(conn, executor_id, request_id)
        return [
            Lease(
                batch_id=r.batch_id,
                index=r.idx,
                attempt=r.attempt,
                custom_id=r.custom_id,
                body=r.body,
                traceparent=r.traceparent,
                endpoint=r.endpoint,
                model=r.model or "",
                project_id=r.project_id,
                tier=r.priority_tier,
                priority=r.priority,
                batch_created_at=r.created_at,
                expires_at=r.expires_at,
                allowed_models=r.allowed_models,
            )
            for r in rows
        ]

    async def heartbeat(self, executor_id: str) -> bool:
        """Keep the session alive; False when it ended and its leases were taken back (a session
        that lapsed but was not rescued yet is still current: nobody has its items)."""
        async with self._db.write() as conn:
            return await queue.heartbeat(conn, executor_id, time.time() + self._ttl)

    async def release(self, refs: Sequence[Ref]) -> int:
        """Queue leased items again at once (their holder is shutting down); their batches' lease
        cursors come down to them first, so the next leases find them."""
        async with self._db.write() as conn:
            await lease_cursors.lower(conn, ((r.batch_id, r.index) for r in refs))
            current = await queue.current(self._db, conn, refs)
            if current:
                await queue.requeue(conn, current)
                await notify(self._db, conn, WORK_CHANNEL)
        return len(current)

    async def rescue_expired(self) -> int:
        """End every session that lapsed (its executor died or was cut off) and queue its items
        again. The next lease bumps their attempt, so the old holder's late result is refused."""
        now = time.time()
        async with self._db.write() as conn:
            rescued = await queue.rescue_lapsed(self._db, conn, now, now - LAPSED_MEMORY_S)
            if rescued:
                await notify(self._db, conn, WORK_CHANNEL)
        return rescued

    async def depth(self) -> dict[tuple[int, str], int]:
        """Open items of running batches per (priority tier, state): `queued` counted on the
        partial index of queued items, `leased` the rest of what the batches have open."""
        async with self._db.read() as conn:
            open_by_tier, queued_by_tier = await queue.depth(conn)
        depth: dict[tuple[int, str], int] = {}
        for tier in (0, 1):
            queued = queued_by_tier.get(tier, 0)
            depth[(tier, ItemState.QUEUED)] = queued
            depth[(tier, ItemState.LEASED)] = max(open_by_tier.get(tier, 0) - queued, 0)
        return depth

    async def stopped(self, batch_ids: Sequence[str]) -> list[Stopped]:
        """Those of `batch_ids` that start no new item: not running, or past their window.
        Only a cancelling batch within its window lets its running items finish (soft)."""
        if not batch_ids:
            return []
        now = time.time()
        async with self._db.read() as conn:
            rows = await queue.statuses(conn, batch_ids)
        stopped = []
        for batch_id in batch_ids:
            row = rows.get(batch_id)
            if row is not None and row.status == BatchStatus.IN_PROGRESS and row.expires_at > now:
                continue
            soft = row is not None and row.status == BatchStatus.CANCELLING and row.expires_at > now
            stopped.append(Stopped(batch_id, hard=not soft))
        return stopped

    async def revoked_batches(self) -> list[str]:
        """Running batches whose API key was revoked or has expired."""
        async with self._db.read() as conn:
            return await projects.running_batches_of_lapsed_keys(conn, time.time())

    async def cancel_revoked(self, batch_id: str) -> bool:
        """Ask a revoked key's batch to end `cancelled`; whether it was running."""
        async with self._db.write() as conn:
            return await batches.request_cancel(conn, batch_id)

    async def closing_batches(self) -> list[Closing]:
        """Batches with open items to close: cancelling ones, and running ones past their window."""
        now = time.time()
        async with self._db.read() as conn:
            rows = await queue.closing(conn, now)
        return [
            Closing(
                r.id,
                BatchStatus.CANCELLED if r.status == BatchStatus.CANCELLING else BatchStatus.EXPIRED,
                r.expires_at <= now,
            )
            for r in rows
        ]

    async def close_open(self, closing: Closing) -> tuple[int, bool]:
        """Close the batch's queued items (and, when `hard`, its leased ones) as cancelled or
        expired, count them as failed, and record how the batch ends. Returns (items closed,
        whether nothing is open any more)."""
        code, message = REVOKED_CODE if closing.revoked else CLOSE_CODES[closing.end]
        async with self._db.write() as conn:
            return await queue.close_open(
                self._db,
                conn,
                batch_id=closing.batch_id,
                end=closing.end,
                error_code=code,
                error_message=message,
                hard=closing.hard,
                now=time.time(),
            )
