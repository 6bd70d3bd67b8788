"""Querying the usage events: sums per group (GET /v1/usage) and the events themselves
(GET /v1/usage/events), always within the caller's project, and their public messages.

One event per finished item is written by the recorder (`source=batch`); the sums are one
GROUP BY over the project's events in the time range, served by `ix_usage_project_time`
(or `ix_usage_batch` when a batch is named). Records rejected at create (no event: they never
ran) are counted per group from their batches (`rejected_requests`). A `batch_id` filter names
a batch of the caller's project, including one deleted or purged whose usage is kept
(`check_batch`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from batchgate.services.common import errors, paging
from batchgate.services.common import proto_values as pv
from batchgate.services.common.db import AnyRow, Database, batches, usage
from batchgate.services.common.db.usage import GROUP_COLUMNS, UsageFilter
from batchgate.services.common.ids import plausible_id
from batchgate.v1 import results_pb2

EVENT_ID_PREFIX = "usage_"
EVENTS_PAGE_DEFAULT = 100
EVENTS_PAGE_MAX = 1000
MAX_EVENT_ID = 2**63 - 1
"""`usage_events.id` is a 64-bit integer (PostgreSQL's int8, SQLite's rowid): no event has a
larger id, and neither database takes a larger parameter for it."""
_EVENT_ID = re.compile(re.escape(EVENT_ID_PREFIX) + r"([1-9][0-9]*)")
"""An event id as `event_message` spells it: ASCII digits, no sign, no leading zero."""


def check_filter(where: UsageFilter) -> UsageFilter:
    """400 for a time range that ends before it starts, or a NUL in a text filter (PostgreSQL
    refuses NUL in text parameters: a 400, not a 500)."""
    if where.start_time and where.end_time and where.end_time <= where.start_time:
        raise errors.invalid("'end_time' must be after 'start_time'.", "invalid_time_range", "end_time")
    for name, value in (
        ("batch_id", where.batch_id),
        ("model", where.model),
        ("api_key_id", where.api_key_id),
    ):
        if "\x00" in value:
            raise errors.invalid(f"'{name}' must not contain NUL characters.", "invalid_value", name)
    return where


async def check_batch(db: Database, project_id: str, batch_id: str) -> None:
    """404 unless `batch_id` is a batch of the project: one it can read (through either API),
    or one whose bookkeeping it still holds, usage events or rejections (a deleted Message
    Batch, a batch purged by retention: their usage is the project's bill until the
    bookkeeping period ends). Those are found by their own project column, so another
    project's batch, or an id that never was, stays a 404."""
    if plausible_id(batch_id):
        where = UsageFilter(project_id=project_id, batch_id=batch_id)
        async with db.read() as conn:
            if await batches.visible(conn, project_id, batch_id, message_batch=None) is not None:
                return
            if await usage.event_page(conn, where, None, 1):
                return
            if any(row.rejected for row in await batches.rejections(conn, where, [])):
                return
    raise errors.not_found("batch", batch_id[:80], "batch_id")


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


async def usage_groups(db: Database, where: UsageFilter, group_by: list[str]) -> list[dict[str, Any]]:
    """One entry per group: the group keys, then requests, token sums, cost and the records
    rejected at create (`rejected_requests`); largest cost first, groups with rejections only
    last. Groups with neither are left out, except the one group of totals that the answer
    without `group_by` always holds (README "Usage and cost"): zeros where nothing was used."""
    check_filter(where)
    async with db.read() as conn:
        rows = await usage.groups(conn, where, group_by)
        rejected = {
            tuple(getattr(r, k) for k in group_by): int(r.rejected or 0)
            for r in await batches.rejections(conn, where, group_by)
        }
    found = []
    for row in rows:
        group = row._asdict()
        group["rejected_requests"] = rejected.pop(tuple(group[k] for k in group_by), 0)
        found.append(group)
    zero = {"requests": 0, "input_tokens": 0, "cached_tokens": 0, "output_tokens": 0, "reasoning_tokens": 0}
    for keys, count in rejected.items():
        found.append(
            {**dict(zip(group_by, keys, strict=True)), **zero, "cost_usd": 0.0, "rejected_requests": count}
        )
    used = [g for g in found if g["requests"] or g["rejected_requests"]]
    if not group_by and not used:
        used.append({**zero, "cost_usd": 0.0, "rejected_requests": 0})
    return used


async def usage_event_page(
    db: Database, where: UsageFilter, after: str, limit: int
) -> tuple[list[AnyRow], bool]:
    """(events oldest first with their item's custom_id, whether more follow).

    `after` must be one of the project's events (400 `invalid_after` otherwise)."""
    check_filter(where)
    async with db.read() as conn:
        number = None
        if after:
            number = event_number(after)
            if number is None or not await usage.is_known(conn, where.project_id, number):
                raise paging.unknown_cursor("usage event", after[:80])
        rows = await usage.event_page(conn, where, number, limit + 1)
    return rows[:limit], len(rows) > limit


def event_number(event_id: str) -> int | None:
    """The row id an event id names, when it is spelled as events are (`usage_1`, never
    `usage_01` or other digits than ASCII ones) and within the column's range; else None."""
    found = _EVENT_ID.fullmatch(event_id)
    if found is None or len(found[1]) > len(str(MAX_EVENT_ID)):
        return None
    number = int(found[1])
    return number if number <= MAX_EVENT_ID else None


def _sums(sums: dict[str, Any]) -> dict[str, Any]:
    """The token and cost fields shared by a group and an event."""
    return {
        "input_tokens": sums["input_tokens"],
        "cached_tokens": sums["cached_tokens"],
        "output_tokens": sums["output_tokens"],
        "reasoning_tokens": sums["reasoning_tokens"],
        "total_tokens": sums["input_tokens"] + sums["output_tokens"],
        "cost": results_pb2.UsageCost(currency="usd", amount=sums["cost_usd"]),
    }


def group_message(group: dict[str, Any], group_by: list[str]) -> results_pb2.UsageGroup:
    keys = {key: pv.string_or_null(group[key] if key in group_by else None) for key in GROUP_COLUMNS}
    return results_pb2.UsageGroup(
        object="usage.group",
        requests=group["requests"],
        rejected_requests=group["rejected_requests"],
        **keys,
        **_sums(group),
    )


def event_message(row: AnyRow) -> results_pb2.UsageEvent:
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
        **_sums(row._asdict()),
    )
