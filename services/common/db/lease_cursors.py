"""Each batch's lease cursor (`batches.lease_cursor`, the scheduler's column; part of the queue
aggregate, `queue.py`): no queued item of the batch lies below it, so a lease picks from the
cursor up and the candidates read "has queued items" off the batch row (`cursor < END`).

Why: PostgreSQL keeps a leased item's entry in the partial index of queued items until vacuum
removes it (with autovacuum off, never). A pick that starts at the batch's first item steps
over every entry the batch leased so far, and so did the candidates' probe for a queued item:
a 1,000,000-item batch fell from ~1,800 to ~730 items/s by 42%. From the cursor a pick steps
over only what was leased since the cursor last moved.

The rule, true at every commit: every queued item's idx >= its batch's cursor.

- `advance` (after a lease, in its transaction) raises the cursor to the first item still
  queued, or END. It reads the items in a statement that starts after the batch row is locked,
  so it sees every requeue committed before; items another lease holds but has not committed
  still look queued to it, so a lease that rolls back leaves nothing below the cursor. On
  PostgreSQL the row is locked SKIP LOCKED, and when someone else holds it the cursor stays
  where it is (the next lease moves it): a lease holds the items it just took, and results and
  closing lock a batch row before its items, so waiting here could deadlock.
- `lower` (wherever items are queued again: released, rescued) brings the cursor down to the
  lowest of them, in the same transaction and before the items change: the batch row, then its
  items, the project's lock order. An advance that read the items before they were queued
  again either committed first (and is lowered after) or finds the row locked and skips.

New items are only ever written before their batch runs (cursor 0), and nothing else queues an
item (`states.ITEM_TRANSITIONS`: queued only from leased).
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import bindparam, case, func, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from batchgate.services.common.db.dialect import PerDialect, skip_locked
from batchgate.services.common.db.engine import Database
from batchgate.services.common.db.schema import batches, items
from batchgate.services.common.states import ItemState

END = 2**31 - 1
"""The cursor of a batch with nothing queued (above every idx; PostgreSQL's largest integer)."""

_LOCK = PerDialect(
    lambda db: skip_locked(db, select(batches.c.id).where(batches.c.id == bindparam("p_batch")))
)

_FIRST_QUEUED = (
    select(items.c.idx)
    .where(
        items.c.batch_id == bindparam("p_batch"),
        items.c.state == ItemState.QUEUED,
        items.c.idx >= batches.c.lease_cursor,
    )
    .order_by(items.c.idx)
    .limit(1)
    .scalar_subquery()
)

_ADVANCE = (
    update(batches)
    .where(batches.c.id == bindparam("p_batch"))
    .values(lease_cursor=func.coalesce(_FIRST_QUEUED, END))
)

_LOWER = (
    update(batches)
    .where(batches.c.id == bindparam("p_batch"))
    .values(
        lease_cursor=case(
            (batches.c.lease_cursor > bindparam("p_idx"), bindparam("p_idx")),
            else_=batches.c.lease_cursor,
        )
    )
)


async def advance(db: Database, conn: AsyncConnection, batch_id: str) -> None:
    """scheduler (lease, `queue.lease_from`): raise the batch's cursor to its first item still
    queued (END when none is); left as it is when another transaction holds the batch row."""
    if db.is_postgres and (await conn.execute(_LOCK(db), {"p_batch": batch_id})).first() is None:
        return
    await conn.execute(_ADVANCE, {"p_batch": batch_id})


async def lower(conn: AsyncConnection, to_queue: Iterable[tuple[str, int]]) -> None:
    """scheduler (release; rescue, `queue.rescue_lapsed`): bring each batch's cursor down to the
    lowest of the (batch id, idx) about to be queued again, before they are, and before their
    rows are locked (batch rows locked in id order). The UPDATE writes the row even when the
    cursor is lower already, so it waits for an advance in flight and applies on top of what
    that advance committed. Lowering an item that then is not queued again only costs the next
    lease a few steps."""
    lowest: dict[str, int] = {}
    for batch_id, idx in to_queue:
        lowest[batch_id] = min(idx, lowest.get(batch_id, idx))
    if lowest:
        await conn.execute(_LOWER, [{"p_batch": b, "p_idx": lowest[b]} for b in sorted(lowest)])


async def lower_for_sessions(conn: AsyncConnection, sessions: list[str]) -> None:
    """scheduler (rescue, `queue.rescue_lapsed`, the sessions' rows locked): `lower` to the items
    these sessions hold, before they are queued again."""
    if sessions:
        lowest = await conn.execute(
            select(items.c.batch_id, func.min(items.c.idx))
            .where(items.c.state == ItemState.LEASED, items.c.leased_by.in_(sessions))
            .group_by(items.c.batch_id)
        )
        await lower(conn, [(batch_id, int(idx)) for batch_id, idx in lowest])
