"""The `usage_events` table (one event per finished item): the only place its SQL lives.

Who may call what: results only. It inserts the events of recorded outcomes, sums spend for
SpendService (ingest asks there before a create, instead of reading this table), and serves
the usage sums and events. Sums are one GROUP BY over the project's events in the time
range, served by `ix_usage_project_time` (or `ix_usage_batch` when a batch is named).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, bindparam, delete, func, insert, select
from sqlalchemy.ext.asyncio import AsyncConnection

from batchgate.services.common.db.dialect import DriverMany
from batchgate.services.common.db.engine import AnyRow
from batchgate.services.common.db.schema import items, usage_events

events = usage_events.c
GROUP_COLUMNS = {"batch_id": events.batch_id, "model": events.model, "api_key_id": events.api_key_id}


@dataclass(frozen=True)
class UsageFilter:
    """What every usage query narrows to; empty strings and zeros mean no filter."""

    project_id: str
    start_time: int = 0
    end_time: int = 0
    batch_id: str = ""
    model: str = ""
    api_key_id: str = ""

    def conditions(self) -> list[ColumnElement[bool]]:
        conditions = [events.project_id == self.project_id]
        if self.start_time:
            conditions.append(events.created_at >= self.start_time)
        if self.end_time:
            conditions.append(events.created_at < self.end_time)
        for column, value in (
            (events.batch_id, self.batch_id),
            (events.model, self.model),
            (events.api_key_id, self.api_key_id),
        ):
            if value:
                conditions.append(column == value)
        return conditions


# Every column but the generated id, one parameter row per event (the recorder's hot path).
_INSERT_EVENTS = DriverMany(
    insert(usage_events).values({c.name: bindparam(c.name) for c in usage_events.c if c.name != "id"})
)


async def insert_events(conn: AsyncConnection, rows: list[dict[str, Any]]) -> None:
    """results: the usage events of recorded outcomes, in the recording transaction."""
    await _INSERT_EVENTS.run(conn, rows)


async def spend(conn: AsyncConnection, project_id: str, api_key_id: str = "") -> tuple[float, float]:
    """results (SpendService): (project's spend, key's spend) in USD; the key's is 0 without a key."""
    total = func.coalesce(func.sum(events.cost_usd), 0.0)
    project = (await conn.execute(select(total).where(events.project_id == project_id))).scalar()
    key: float | None = 0.0
    if api_key_id:
        key = (
            await conn.execute(
                select(total).where(events.api_key_id == api_key_id, events.project_id == project_id)
            )
        ).scalar()
    return float(project or 0.0), float(key or 0.0)


async def groups(conn: AsyncConnection, where: UsageFilter, group_by: list[str]) -> list[AnyRow]:
    """results: one row per group: the group keys, then requests, token sums and cost; largest
    cost first."""
    keys = [GROUP_COLUMNS[k].label(k) for k in group_by]
    cost = func.coalesce(func.sum(events.cost_usd), 0.0)
    query = (
        select(
            *keys,
            func.count().label("requests"),
            func.coalesce(func.sum(events.input_tokens), 0).label("input_tokens"),
            func.coalesce(func.sum(events.cached_tokens), 0).label("cached_tokens"),
            func.coalesce(func.sum(events.output_tokens), 0).label("output_tokens"),
            func.coalesce(func.sum(events.reasoning_tokens), 0).label("reasoning_tokens"),
            cost.label("cost_usd"),
        )
        .where(*where.conditions())
        .order_by(cost.desc(), *keys)
    )
    if keys:
        query = query.group_by(*keys)
    return list((await conn.execute(query)).all())


async def is_known(conn: AsyncConnection, project_id: str, event_id: int) -> bool:
    """results: whether the project has the event `event_id`."""
    query = select(events.id).where(events.id == event_id, events.project_id == project_id)
    return (await conn.execute(query)).first() is not None


async def event_page(
    conn: AsyncConnection, where: UsageFilter, after_id: int | None, limit: int
) -> list[AnyRow]:
    """results: up to `limit` events (after the id `after_id`, if any), oldest first, each with
    its item's custom_id."""
    conditions = where.conditions()
    if after_id is not None:
        conditions.append(events.id > after_id)
    query = (
        select(usage_events, items.c.custom_id)
        .outerjoin(items, (items.c.batch_id == events.batch_id) & (items.c.idx == events.item_idx))
        .where(*conditions)
        .order_by(events.id)
        .limit(limit)
    )
    return list((await conn.execute(query)).all())


async def delete_of_batch(conn: AsyncConnection, batch_id: str) -> None:
    """scheduler (retention): remove a batch's usage events once its bookkeeping period is over."""
    await conn.execute(delete(usage_events).where(events.batch_id == batch_id))
