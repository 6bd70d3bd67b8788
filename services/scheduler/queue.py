"""The queue's statements: lease, renew, release, rescue, and closing queued items.

Leasing is one UPDATE … WHERE idx IN (SELECT … LIMIT n [FOR UPDATE SKIP LOCKED]) RETURNING
per batch that gets a share, walking the partial index on queued items. Every lease bumps
`attempt`, the fencing token a result must carry to be accepted.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import bindparam, exists, func, select, update

from services.common.db import Database
from services.common.db.dialect import among_skip_locked
from services.common.db.schema import batches, items
from services.scheduler.fairness import Candidate, allocate, top_group

CANDIDATE_BATCHES = 200
LEASE_ROUNDS = 3

CLOSE_CODES = {
    "cancelled": ("batch_cancelled", "This request was not executed because the batch was cancelled."),
    "expired": ("batch_expired", "This request could not be executed before the completion window expired."),
}


@dataclass(frozen=True)
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
    expires_at: float


@dataclass(frozen=True)
class Ref:
    batch_id: str
    index: int
    attempt: int


@dataclass(frozen=True)
class _Runnable:
    candidate: Candidate
    endpoint: str
    model: str


class Queue:
    def __init__(self, db: Database, lease_ttl_s: float) -> None:
        self._db = db
        self._ttl = lease_ttl_s
        self._rotation = 0

    async def _runnable(self, now: float) -> list[_Runnable]:
        has_queued = exists().where(items.c.batch_id == batches.c.id, items.c.state == "queued")
        query = (
            select(
                batches.c.id,
                batches.c.project_id,
                batches.c.priority_tier,
                batches.c.priority,
                batches.c.created_at,
                batches.c.endpoint,
                batches.c.model,
            )
            .where(batches.c.status == "in_progress", batches.c.expires_at > now, has_queued)
            .order_by(batches.c.priority_tier.desc(), batches.c.priority.desc(), batches.c.created_at)
            .limit(CANDIDATE_BATCHES)
        )
        async with self._db.read() as conn:
            rows = (await conn.execute(query)).all()
        return [
            _Runnable(
                Candidate(r.id, r.project_id, r.priority_tier, r.priority, r.created_at),
                r.endpoint,
                r.model or "",
            )
            for r in rows
        ]

    async def lease(self, executor_id: str, max_items: int) -> list[Lease]:
        """Lease up to `max_items` items: highest priority first, fair within a priority."""
        now = time.time()
        runnable = {r.candidate.batch_id: r for r in await self._runnable(now)}
        if not runnable:
            return []
        expires_at = now + self._ttl
        leased: list[Lease] = []
        remaining = max_items
        self._rotation += 1
        async with self._db.write() as conn:
            for _ in range(LEASE_ROUNDS):
                group = top_group([r.candidate for r in runnable.values()])
                if not group or remaining <= 0:
                    break
                for candidate, share in allocate(group, remaining, self._rotation):
                    info = runnable[candidate.batch_id]
                    picked = (
                        select(items.c.idx)
                        .where(items.c.batch_id == candidate.batch_id, items.c.state == "queued")
                        .order_by(items.c.idx)
                        .limit(share)
                    )
                    rows = (
                        await conn.execute(
                            update(items)
                            .where(
                                items.c.batch_id == candidate.batch_id,
                                items.c.state == "queued",
                                among_skip_locked(self._db, items.c.idx, picked),
                            )
                            .values(
                                state="leased",
                                attempt=items.c.attempt + 1,
                                leased_by=executor_id,
                                lease_expires_at=expires_at,
                            )
                            .returning(
                                items.c.idx,
                                items.c.attempt,
                                items.c.custom_id,
                                items.c.body,
                                items.c.traceparent,
                            )
                        )
                    ).all()
                    leased += [
                        Lease(
                            candidate.batch_id,
                            r.idx,
                            r.attempt,
                            r.custom_id,
                            r.body,
                            r.traceparent,
                            info.endpoint,
                            info.model,
                            candidate.project_id,
                            expires_at,
                        )
                        for r in sorted(rows, key=lambda r: r.idx)
                    ]
                    remaining -= len(rows)
                    if len(rows) < share:
                        del runnable[candidate.batch_id]
        return leased

    async def renew(self, refs: Sequence[Ref]) -> tuple[list[Ref], float]:
        """Extend current leases; returns the refs that are no longer current, and the new expiry."""
        if not refs:
            return [], time.time() + self._ttl
        expires_at = time.time() + self._ttl
        stmt = (
            update(items)
            .where(
                items.c.batch_id == bindparam("b"),
                items.c.idx == bindparam("i"),
                items.c.attempt == bindparam("a"),
                items.c.state == "leased",
            )
            .values(lease_expires_at=expires_at)
        )
        async with self._db.write() as conn:
            result = await conn.execute(stmt, [{"b": r.batch_id, "i": r.index, "a": r.attempt} for r in refs])
            if result.rowcount == len(refs):
                return [], expires_at
            current = await _current_leases(conn, refs)
        return [r for r in refs if (r.batch_id, r.index, r.attempt) not in current], expires_at

    async def release(self, refs: Sequence[Ref]) -> int:
        """Queue leased items again at once (their holder is shutting down)."""
        if not refs:
            return 0
        stmt = (
            update(items)
            .where(
                items.c.batch_id == bindparam("b"),
                items.c.idx == bindparam("i"),
                items.c.attempt == bindparam("a"),
                items.c.state == "leased",
            )
            .values(state="queued", leased_by=None, lease_expires_at=None)
        )
        async with self._db.write() as conn:
            result = await conn.execute(stmt, [{"b": r.batch_id, "i": r.index, "a": r.attempt} for r in refs])
        return int(result.rowcount)

    async def rescue_expired(self) -> int:
        """Queue again every item whose lease lapsed (its executor died or stalled)."""
        async with self._db.write() as conn:
            result = await conn.execute(
                update(items)
                .where(items.c.state == "leased", items.c.lease_expires_at < time.time())
                .values(state="queued", leased_by=None, lease_expires_at=None)
            )
        return int(result.rowcount)

    async def closing_batches(self) -> list[tuple[str, str]]:
        """(batch_id, end) for batches whose queued items must be closed: cancelling ones and
        running ones past their window."""
        now = time.time()
        async with self._db.read() as conn:
            rows = (
                await conn.execute(
                    select(batches.c.id, batches.c.status).where(
                        (batches.c.status == "cancelling")
                        | ((batches.c.status == "in_progress") & (batches.c.expires_at <= now))
                    )
                )
            ).all()
        return [(r.id, "cancelled" if r.status == "cancelling" else "expired") for r in rows]

    async def close_queued(self, batch_id: str, end: str) -> tuple[int, bool]:
        """Mark the batch's queued items `end` (cancelled|expired), count them as failed, and
        record how the batch ends. Returns (items closed, whether nothing is open any more)."""
        code, message = CLOSE_CODES[end]
        now = time.time()
        async with self._db.write() as conn:
            closed = (
                await conn.execute(
                    update(items)
                    .where(items.c.batch_id == batch_id, items.c.state == "queued")
                    .values(
                        state=end,
                        error_code=code,
                        error_message=message,
                        finished_at=now,
                        leased_by=None,
                        lease_expires_at=None,
                    )
                )
            ).rowcount
            await conn.execute(
                update(batches)
                .where(batches.c.id == batch_id)
                .values(
                    failed_count=batches.c.failed_count + closed,
                    end_status=func.coalesce(batches.c.end_status, end),
                )
            )
            row = (
                await conn.execute(
                    select(batches.c.total, batches.c.completed_count, batches.c.failed_count).where(
                        batches.c.id == batch_id
                    )
                )
            ).one()
        return int(closed), row.completed_count + row.failed_count >= row.total


async def _current_leases(conn: Any, refs: Sequence[Ref]) -> set[tuple[str, int, int]]:
    by_batch: dict[str, list[int]] = defaultdict(list)
    for r in refs:
        by_batch[r.batch_id].append(r.index)
    current: set[tuple[str, int, int]] = set()
    for batch_id, indexes in by_batch.items():
        rows = (
            await conn.execute(
                select(items.c.idx, items.c.attempt).where(
                    items.c.batch_id == batch_id, items.c.idx.in_(indexes), items.c.state == "leased"
                )
            )
        ).all()
        current.update((batch_id, r.idx, r.attempt) for r in rows)
    return current
