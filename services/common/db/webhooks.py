"""The `webhook_deliveries` and `webhook_attempts` tables (one aggregate: a delivery and its
attempts): the only place their SQL lives. Results alone calls these.

`next_attempt_at` is also the claim: a replica that takes a due delivery moves it past the
attempt's time limit and bumps `attempts` (the fencing token of that attempt), so a replica
that dies mid-attempt only delays the next one.
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import delete, exists, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from batchgate.services.common.db.dialect import skip_locked
from batchgate.services.common.db.engine import AnyRow, Database
from batchgate.services.common.db.schema import webhook_attempts, webhook_deliveries
from batchgate.services.common.states import DeliveryStatus

deliveries = webhook_deliveries.c


async def enqueue(
    conn: AsyncConnection,
    *,
    event_id: str,
    batch_id: str,
    project_id: str,
    url: str,
    event_type: str,
    payload: str,
) -> None:
    """results: queue an event for delivery now, in the transaction that ended its batch."""
    now = time.time()
    await conn.execute(
        insert(webhook_deliveries).values(
            event_id=event_id,
            batch_id=batch_id,
            project_id=project_id,
            url=url,
            event_type=event_type,
            payload=payload,
            status=DeliveryStatus.PENDING,
            attempts=0,
            created_at=now,
            next_attempt_at=now,
        )
    )


async def any_due(conn: AsyncConnection, now: float) -> bool:
    """results: whether a pending delivery is due (an idle poll stays a read)."""
    due = exists().where(deliveries.status == DeliveryStatus.PENDING, deliveries.next_attempt_at <= now)
    return bool((await conn.execute(select(due))).scalar())


async def claim_due(
    db: Database, conn: AsyncConnection, *, limit: int, max_attempts: int, claim_until: float, now: float
) -> list[AnyRow]:
    """results: take up to `limit` due deliveries for one attempt each (attempt rows started);
    returns their (id, event_id, url, payload, project_id, attempts). A due delivery whose last
    attempt's replica died without recording an outcome is given up (`failed`)."""
    lapsed = (deliveries.status == DeliveryStatus.PENDING, deliveries.next_attempt_at <= now)
    await conn.execute(
        update(webhook_deliveries)
        .where(*lapsed, deliveries.attempts >= max_attempts)
        .values(status=DeliveryStatus.FAILED, next_attempt_at=None)
    )
    # Two statements, not `id IN (SELECT … LIMIT n SKIP LOCKED)`: PostgreSQL may re-run such a
    # sub-select per row and take more than `limit`.
    picked = (
        select(deliveries.id)
        .where(*lapsed, deliveries.attempts < max_attempts)
        .order_by(deliveries.next_attempt_at)
        .limit(limit)
    )
    ids = list((await conn.execute(skip_locked(db, picked))).scalars().all())
    if not ids:
        return []
    rows = list(
        (
            await conn.execute(
                update(webhook_deliveries)
                .where(deliveries.id.in_(ids), deliveries.status == DeliveryStatus.PENDING)
                .values(attempts=deliveries.attempts + 1, next_attempt_at=claim_until)
                .returning(
                    deliveries.id,
                    deliveries.event_id,
                    deliveries.url,
                    deliveries.payload,
                    deliveries.project_id,
                    deliveries.attempts,
                )
            )
        ).all()
    )
    if rows:
        await conn.execute(
            insert(webhook_attempts),
            [{"delivery_id": r.id, "attempt": r.attempts, "started_at": now} for r in rows],
        )
    return rows


async def finish_attempt(
    conn: AsyncConnection,
    *,
    delivery_id: int,
    attempt: int,
    status_code: int | None,
    error: str | None,
    outcome: dict[str, Any],
    now: float,
) -> None:
    """results: store an attempt's outcome, and the delivery's (`outcome`: its new status and
    times) only while this attempt is its current one."""
    await conn.execute(
        update(webhook_attempts)
        .where(webhook_attempts.c.delivery_id == delivery_id, webhook_attempts.c.attempt == attempt)
        .values(finished_at=now, status_code=status_code, error=error)
    )
    await conn.execute(
        update(webhook_deliveries)
        .where(
            deliveries.id == delivery_id,
            deliveries.attempts == attempt,
            deliveries.status == DeliveryStatus.PENDING,
        )
        .values(last_status_code=status_code, last_error=error, **outcome)
    )


async def of_batch(conn: AsyncConnection, batch_id: str) -> tuple[list[AnyRow], list[AnyRow]]:
    """results: a batch's deliveries (oldest first) and all their attempts (in order)."""
    rows = list(
        (
            await conn.execute(
                select(webhook_deliveries).where(deliveries.batch_id == batch_id).order_by(deliveries.id)
            )
        ).all()
    )
    attempts = list(
        (
            await conn.execute(
                select(webhook_attempts)
                .where(webhook_attempts.c.delivery_id.in_([r.id for r in rows]))
                .order_by(webhook_attempts.c.delivery_id, webhook_attempts.c.attempt)
            )
        ).all()
    )
    return rows, attempts


async def delete_of_batch(conn: AsyncConnection, batch_id: str) -> None:
    """scheduler (retention): remove a purged batch's deliveries and their attempts."""
    ids = select(webhook_deliveries.c.id).where(deliveries.batch_id == batch_id)
    await conn.execute(delete(webhook_attempts).where(webhook_attempts.c.delivery_id.in_(ids)))
    await conn.execute(delete(webhook_deliveries).where(deliveries.batch_id == batch_id))
