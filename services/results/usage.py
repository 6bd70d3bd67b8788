"""Querying the usage events: sums per group (GET /v1/usage) and the events themselves
(GET /v1/usage/events), always within the caller's project, and their public messages.

One event per finished item is written by the recorder (`source=batch`); the sums are one
GROUP BY over the project's events in the time range, served by `ix_usage_project_time`
(or `ix_usage_batch` when a batch is named).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, Row, func, select

from batchgate.v1 import results_pb2
from services.common import errors, paging
from services.common import proto_values as pv
from services.common.db import Database
from services.common.db.schema import items, usage_events

EVENT_ID_PREFIX = "usage_"
EVENTS_PAGE_DEFAULT = 100
EVENTS_PAGE_MAX = 1000
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
        if self.start_time and self.end_time and self.end_time <= self.start_time:
            raise errors.invalid("'end_time' must be after 'start_time'.", "invalid_time_range", "end_time")
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
            if "\x00" in value:  # PostgreSQL refuses NUL in text parameters: a 400, not a 500
                raise errors.invalid(
                    f"'{column.name}' must not contain NUL characters.", "invalid_value", column.name
                )
            if value:
                conditions.append(column == value)
        return conditions


def parse_group_by(values: Iterable[str]) -> list[str]:
    """`group_by` keys, repeated and/or comma-separated, in a stable order."""
    keys = {key.strip() for value in values for key in value.split(",") if key.strip()}
    unknown = sorted(keys - set(GROUP_COLUMNS))
    if unknown:
        raise errors.invalid(
            f"Unknown 'group_by' key {unknown[0]!r}; use {', '.join(GROUP_COLUMNS)}.",
            "invalid_group_by",
            "group_by",
        )
    return [key for key in GROUP_COLUMNS if key in keys]


async def usage_groups(db: Database, where: UsageFilter, group_by: list[str]) -> list[Row[Any]]:
    """One row per group: the group keys, then requests, token sums and cost; largest cost first."""
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
    async with db.read() as conn:
        return list((await conn.execute(query)).all())


async def usage_event_page(
    db: Database, where: UsageFilter, after: str, limit: int
) -> tuple[list[Row[Any]], bool]:
    """(events oldest first with their item's custom_id, whether more follow).

    `after` must be one of the project's events (400 `invalid_after` otherwise)."""
    conditions = where.conditions()
    async with db.read() as conn:
        if after:
            digits = after.removeprefix(EVENT_ID_PREFIX)
            number = int(digits) if after.startswith(EVENT_ID_PREFIX) and digits.isdigit() else None
            known = (
                number is not None
                and (
                    await conn.execute(
                        select(events.id).where(events.id == number, events.project_id == where.project_id)
                    )
                ).first()
            )
            if not known:
                raise paging.unknown_cursor("usage event", after[:80])
            conditions.append(events.id > number)
        query = (
            select(usage_events, items.c.custom_id)
            .outerjoin(items, (items.c.batch_id == events.batch_id) & (items.c.idx == events.item_idx))
            .where(*conditions)
            .order_by(events.id)
            .limit(limit + 1)
        )
        rows = list((await conn.execute(query)).all())
    return rows[:limit], len(rows) > limit


def _sums(row: Row[Any]) -> dict[str, Any]:
    """The token and cost fields shared by a group and an event."""
    return {
        "input_tokens": row.input_tokens,
        "cached_tokens": row.cached_tokens,
        "output_tokens": row.output_tokens,
        "reasoning_tokens": row.reasoning_tokens,
        "total_tokens": row.input_tokens + row.output_tokens,
        "cost": results_pb2.UsageCost(currency="usd", amount=row.cost_usd),
    }


def group_message(row: Row[Any], group_by: list[str]) -> results_pb2.UsageGroup:
    keys = {key: pv.string_or_null(getattr(row, key) if key in group_by else None) for key in GROUP_COLUMNS}
    return results_pb2.UsageGroup(object="usage.group", requests=row.requests, **keys, **_sums(row))


def event_message(row: Row[Any]) -> results_pb2.UsageEvent:
    return results_pb2.UsageEvent(
        id=f"{EVENT_ID_PREFIX}{row.id}",
        object="usage.event",
        created_at=int(row.created_at),
        source=row.source,
        batch_id=row.batch_id,
        item_index=row.item_idx,
        custom_id=pv.string_or_null(row.custom_id),
        api_key_id=row.api_key_id,
        model=row.model,
        **_sums(row),
    )
