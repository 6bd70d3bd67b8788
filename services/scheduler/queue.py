"""The queue's statements: lease, release, executor sessions and the rescue of a dead
session's items, and closing the open items of cancelled and expired batches.

Leasing is one UPDATE … WHERE idx IN (SELECT … LIMIT n [FOR UPDATE SKIP LOCKED]) RETURNING
per batch that gets a share, walking the partial index on queued items (on PostgreSQL the
sub-select is written so that it runs exactly once: `dialect.in_skip_locked`). Concurrent
leasers on several replicas skip each other's rows instead of waiting, and a row updated
meanwhile is re-checked (`state='queued'`) before it is taken. Every lease bumps `attempt`,
the fencing token a result must carry to be accepted. The same statement re-checks that the
batch still runs, so a batch cancelled or expired after the candidates were read hands out
nothing more.

A lease belongs to the executor session that took it (`items.leased_by`): it lasts as long
as the session, which the executor keeps alive with heartbeats every few seconds, however many
items it holds (one row updated, not one per item). Maintenance ends a lapsed session and
queues its items again in one transaction, so a dead executor's work runs again a lease time
after its last heartbeat. An ended session never comes back: its heartbeats are answered "not
alive" and its lease calls refused (`SessionLost`), so an executor that was only cut off drops
what it held and carries on under a new session.

Lock order on PostgreSQL, wherever one transaction touches both: the batch row, then its
items (results' recorder does the same), so closing and recording cannot deadlock; a session
row before items (leasing and rescue), so those two cannot either.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import bindparam, exists, func, select, update

from services.common.db import Database
from services.common.db.dialect import in_skip_locked, lock_rows, notify, upsert
from services.common.db.schema import batches, executor_sessions, items
from services.common.states import BATCH_RUNNING, ITEM_OPEN, BatchStatus, ItemErrorCode, ItemState
from services.scheduler.fairness import Candidate, allocate, top_group
from services.scheduler.work_signal import WORK_CHANNEL

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
    tier: int
    priority: int
    batch_created_at: float


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
class Ref:
    batch_id: str
    index: int
    attempt: int


@dataclass(frozen=True)
class Closing:
    """A batch whose open items must be closed: `end` is how they end (cancelled|expired);
    `hard` also closes the leased ones (its window passed: late results are refused)."""

    batch_id: str
    end: BatchStatus
    hard: bool


@dataclass(frozen=True)
class Stopped:
    """A batch that starts no new item; `hard`: its leased items are no longer current either
    (its window passed, or it ended)."""

    batch_id: str
    hard: bool


# One lease, matched on its fencing token (executemany: one row per parameter set).
_UPDATE_LEASE = update(items).where(
    items.c.batch_id == bindparam("b"),
    items.c.idx == bindparam("i"),
    items.c.attempt == bindparam("a"),
    items.c.state == ItemState.LEASED,
)


def _params(refs: Sequence[Ref]) -> list[dict[str, Any]]:
    return [{"b": r.batch_id, "i": r.index, "a": r.attempt} for r in refs]


class SessionLost(Exception):
    """The executor's session lapsed and its leases were taken back: it must open a new one."""


@dataclass(frozen=True)
class _Runnable:
    candidate: Candidate
    endpoint: str
    model: str


def _outranks(candidate: Candidate, outrank: tuple[int, int] | None) -> bool:
    return outrank is not None and (candidate.tier, candidate.priority) > outrank


def _still_running(batch_id: str, now: float) -> Any:
    return exists().where(
        batches.c.id == batch_id, batches.c.status == BatchStatus.IN_PROGRESS, batches.c.expires_at > now
    )


class Queue:
    def __init__(self, db: Database, lease_ttl_s: float) -> None:
        self._db = db
        self._ttl = lease_ttl_s
        self._rotation = 0

    @property
    def lease_ttl_s(self) -> float:
        return self._ttl

    async def _runnable(self, now: float) -> list[_Runnable]:
        """The batches a lease may draw from, at most CANDIDATE_BATCHES of them.

        Within a priority, each project's oldest batch comes before any project's second one
        (`project_rank`), so a project with hundreds of queued batches cannot push another
        project's only batch out of the candidates.
        """
        has_queued = exists().where(items.c.batch_id == batches.c.id, items.c.state == ItemState.QUEUED)
        priority_order = (batches.c.priority_tier.desc(), batches.c.priority.desc())
        ranked = (
            select(
                batches.c.id,
                batches.c.project_id,
                batches.c.priority_tier,
                batches.c.priority,
                batches.c.created_at,
                batches.c.endpoint,
                batches.c.model,
                func.row_number()
                .over(partition_by=batches.c.project_id, order_by=(*priority_order, batches.c.created_at))
                .label("project_rank"),
            )
            .where(batches.c.status == BatchStatus.IN_PROGRESS, batches.c.expires_at > now, has_queued)
            .subquery()
        )
        query = (
            select(ranked)
            .order_by(
                ranked.c.priority_tier.desc(),
                ranked.c.priority.desc(),
                ranked.c.project_rank,
                ranked.c.created_at,
            )
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
        runnable = {r.candidate.batch_id: r for r in await self._runnable(now)}
        best = top_group([r.candidate for r in runnable.values()])
        if not best or (max_items <= 0 and not _outranks(best[0], request.outrank)):
            return []
        leased: list[Lease] = []
        remaining = max_items
        extra = request.outranking if request.outrank is not None else 0
        self._rotation += 1
        async with self._db.write() as conn:
            await self._keep_session(conn, executor_id, now)
            for _ in range(LEASE_ROUNDS):
                group = top_group([r.candidate for r in runnable.values()])
                if not group:
                    break
                capacity = remaining + (extra if _outranks(group[0], request.outrank) else 0)
                if capacity <= 0:
                    break
                for candidate, share in allocate(group, capacity, self._rotation):
                    info = runnable[candidate.batch_id]
                    rows = await self._lease_from(
                        conn, candidate.batch_id, share, executor_id, request.request_id, now
                    )
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
                            candidate.tier,
                            candidate.priority,
                            candidate.created_at,
                        )
                        for r in sorted(rows, key=lambda r: r.idx)
                    ]
                    regular = min(len(rows), remaining)
                    remaining -= regular
                    extra -= len(rows) - regular
                    if len(rows) < share:
                        del runnable[candidate.batch_id]
        return leased

    async def _leased_by_request(self, executor_id: str, request_id: str) -> list[Lease]:
        """What the call `request_id` leased to the session and is still leased to it."""
        async with self._db.read() as conn:
            rows = (
                await conn.execute(
                    select(
                        items.c.batch_id,
                        items.c.idx,
                        items.c.attempt,
                        items.c.custom_id,
                        items.c.body,
                        items.c.traceparent,
                        batches.c.endpoint,
                        batches.c.model,
                        batches.c.project_id,
                        batches.c.priority_tier,
                        batches.c.priority,
                        batches.c.created_at,
                    )
                    .join(batches, batches.c.id == items.c.batch_id)
                    .where(
                        items.c.state == ItemState.LEASED,
                        items.c.leased_by == executor_id,
                        items.c.lease_request == request_id,
                    )
                    .order_by(items.c.batch_id, items.c.idx)
                )
            ).all()
        return [
            Lease(
                r.batch_id,
                r.idx,
                r.attempt,
                r.custom_id,
                r.body,
                r.traceparent,
                r.endpoint,
                r.model or "",
                r.project_id,
                r.priority_tier,
                r.priority,
                r.created_at,
            )
            for r in rows
        ]

    async def _lease_from(
        self, conn: Any, batch_id: str, count: int, executor_id: str, request_id: str, now: float
    ) -> list[Any]:
        picked = (
            select(items.c.idx)
            .where(items.c.batch_id == batch_id, items.c.state == ItemState.QUEUED)
            .order_by(items.c.idx)
            .limit(count)
        )
        result = await conn.execute(
            update(items)
            .where(
                items.c.batch_id == batch_id,
                items.c.state == ItemState.QUEUED,
                in_skip_locked(self._db, items.c.idx, picked),
                _still_running(batch_id, now),
            )
            .values(
                state=ItemState.LEASED,
                attempt=items.c.attempt + 1,
                leased_by=executor_id,
                lease_request=request_id or None,
            )
            .returning(items.c.idx, items.c.attempt, items.c.custom_id, items.c.body, items.c.traceparent)
        )
        return list(result.all())

    async def _keep_session(self, conn: Any, executor_id: str, now: float) -> None:
        statement = upsert(
            self._db,
            executor_sessions,
            {"id": executor_id, "started_at": now, "expires_at": now + self._ttl},
            keys=("id",),
            update=("expires_at",),
            where=executor_sessions.c.lapsed_at.is_(None),
        )
        if (await conn.execute(statement)).rowcount != 1:
            raise SessionLost(executor_id)

    async def heartbeat(self, executor_id: str) -> bool:
        """Keep the session alive; False when it ended and its leases were taken back (a session
        that lapsed but was not rescued yet is still current: nobody has its items)."""
        async with self._db.write() as conn:
            result = await conn.execute(
                update(executor_sessions)
                .where(executor_sessions.c.id == executor_id, executor_sessions.c.lapsed_at.is_(None))
                .values(expires_at=time.time() + self._ttl)
            )
        return result.rowcount == 1

    async def release(self, refs: Sequence[Ref]) -> int:
        """Queue leased items again at once (their holder is shutting down)."""
        async with self._db.write() as conn:
            current = await self._current(conn, refs)
            if current:
                await conn.execute(
                    _UPDATE_LEASE.values(state=ItemState.QUEUED, leased_by=None), _params(current)
                )
                await notify(self._db, conn, WORK_CHANNEL)
        return len(current)

    async def _current(self, conn: Any, refs: Sequence[Ref]) -> list[Ref]:
        """Those of `refs` that are the items' current leases, locked (PostgreSQL) in key order.

        (asyncpg reports no row counts for executemany, so what a batched UPDATE will touch is
        read first, one SELECT per batch.)
        """
        by_batch: dict[str, list[int]] = defaultdict(list)
        for r in refs:
            by_batch[r.batch_id].append(r.index)
        current: set[Ref] = set()
        for batch_id in sorted(by_batch):
            rows = await conn.execute(
                lock_rows(
                    self._db,
                    select(items.c.idx, items.c.attempt)
                    .where(
                        items.c.batch_id == batch_id,
                        items.c.idx.in_(by_batch[batch_id]),
                        items.c.state == ItemState.LEASED,
                    )
                    .order_by(items.c.idx),
                )
            )
            current.update(Ref(batch_id, r.idx, r.attempt) for r in rows)
        return [r for r in refs if r in current]

    async def rescue_expired(self) -> int:
        """End every session that lapsed (its executor died or was cut off) and queue its items
        again. The next lease bumps their attempt, so the old holder's late result is refused."""
        now = time.time()
        async with self._db.write() as conn:
            lapsed = list(
                (
                    await conn.execute(
                        lock_rows(
                            self._db,
                            select(executor_sessions.c.id).where(
                                executor_sessions.c.lapsed_at.is_(None), executor_sessions.c.expires_at < now
                            ),
                        )
                    )
                ).scalars()
            )
            await conn.execute(
                executor_sessions.delete().where(executor_sessions.c.lapsed_at < now - LAPSED_MEMORY_S)
            )
            if not lapsed:
                return 0
            rescued = 0
            for session in lapsed:
                count = (
                    await conn.execute(
                        update(items)
                        .where(items.c.state == ItemState.LEASED, items.c.leased_by == session)
                        .values(state=ItemState.QUEUED, leased_by=None)
                    )
                ).rowcount
                ended = executor_sessions.c.id == session
                if count:  # ended for good: its executor hears so and goes on under a new session
                    await conn.execute(update(executor_sessions).where(ended).values(lapsed_at=now))
                else:  # it held nothing: it may come back as it is
                    await conn.execute(executor_sessions.delete().where(ended))
                rescued += count
            if rescued:
                await notify(self._db, conn, WORK_CHANNEL)
        return rescued

    async def depth(self) -> dict[tuple[int, str], int]:
        """Open items of running batches per (priority tier, state): `queued` counted on the
        partial index of queued items, `leased` the rest of what the batches have open."""
        running = batches.c.status.in_(BATCH_RUNNING)
        open_items = batches.c.total - batches.c.completed_count - batches.c.failed_count
        async with self._db.read() as conn:
            open_by_tier = dict(
                (
                    await conn.execute(
                        select(batches.c.priority_tier, func.sum(open_items))
                        .where(running)
                        .group_by(batches.c.priority_tier)
                    )
                ).all()
            )
            queued_by_tier = dict(
                (
                    await conn.execute(
                        select(batches.c.priority_tier, func.count())
                        .select_from(items.join(batches, batches.c.id == items.c.batch_id))
                        .where(items.c.state == ItemState.QUEUED, running)
                        .group_by(batches.c.priority_tier)
                    )
                ).all()
            )
        depth: dict[tuple[int, str], int] = {}
        for tier in (0, 1):
            queued = int(queued_by_tier.get(tier) or 0)
            depth[(tier, ItemState.QUEUED)] = queued
            depth[(tier, ItemState.LEASED)] = max(int(open_by_tier.get(tier) or 0) - queued, 0)
        return depth

    async def stopped(self, batch_ids: Sequence[str]) -> list[Stopped]:
        """Those of `batch_ids` that start no new item: not running, or past their window.
        Only a cancelling batch within its window lets its running items finish (soft)."""
        if not batch_ids:
            return []
        now = time.time()
        async with self._db.read() as conn:
            rows = {
                r.id: r
                for r in await conn.execute(
                    select(batches.c.id, batches.c.status, batches.c.expires_at).where(
                        batches.c.id.in_(batch_ids)
                    )
                )
            }
        stopped = []
        for batch_id in batch_ids:
            row = rows.get(batch_id)
            if row is not None and row.status == BatchStatus.IN_PROGRESS and row.expires_at > now:
                continue
            soft = row is not None and row.status == BatchStatus.CANCELLING and row.expires_at > now
            stopped.append(Stopped(batch_id, hard=not soft))
        return stopped

    async def closing_batches(self) -> list[Closing]:
        """Batches with open items to close: cancelling ones, and running ones past their window."""
        now = time.time()
        async with self._db.read() as conn:
            rows = (
                await conn.execute(
                    select(batches.c.id, batches.c.status, batches.c.expires_at).where(
                        (batches.c.status == BatchStatus.CANCELLING)
                        | ((batches.c.status == BatchStatus.IN_PROGRESS) & (batches.c.expires_at <= now))
                    )
                )
            ).all()
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
        code, message = CLOSE_CODES[closing.end]
        states = ITEM_OPEN if closing.hard else (ItemState.QUEUED,)
        now = time.time()
        async with self._db.write() as conn:
            batch = (
                await conn.execute(
                    lock_rows(
                        self._db,
                        select(
                            batches.c.status,
                            batches.c.end_status,
                            batches.c.total,
                            batches.c.completed_count,
                            batches.c.failed_count,
                        ).where(batches.c.id == closing.batch_id),
                    )
                )
            ).first()
            if batch is None or batch.status not in BATCH_RUNNING:
                return 0, False
            closed = (
                await conn.execute(
                    update(items)
                    .where(items.c.batch_id == closing.batch_id, items.c.state.in_(states))
                    .values(
                        state=closing.end,
                        error_code=code,
                        error_message=message,
                        finished_at=now,
                        leased_by=None,
                    )
                )
            ).rowcount
            if closed:
                # A batch whose items all finished before its deadline still ends `completed`:
                # only closing something decides the end (cancel already decided it).
                await conn.execute(
                    update(batches)
                    .where(batches.c.id == closing.batch_id)
                    .values(
                        failed_count=batches.c.failed_count + closed,
                        end_status=batch.end_status or closing.end,
                    )
                )
        settled = batch.completed_count + batch.failed_count + closed >= batch.total
        return int(closed), settled
