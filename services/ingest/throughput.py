"""A running batch's pace over the last minute: the batch object's `throughput` extension.

`items_per_s` and `tokens_per_s` count the items executors finished (succeeded or failed
upstream) in the last `WINDOW_S` seconds, or since the batch started when that is sooner;
`eta_s` is the items still open at that pace (null while nothing finishes). Only a batch in
progress has one; any other batch's `throughput` is null. One grouped query serves a whole
page of batches.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from batchgate.services.common.db import AnyRow, Connection, items
from batchgate.services.common.states import BatchStatus

WINDOW_S = 60.0
MIN_WINDOW_S = 1.0  # a batch that started a moment ago is not credited with an infinite rate


def pace(row: AnyRow, finished: tuple[int, int], now: float) -> dict[str, Any]:
    """The `throughput` object of the running batch `row`, from (items, tokens) finished in
    its window."""
    started = row.in_progress_at or row.created_at
    window = max(min(WINDOW_S, now - started), MIN_WINDOW_S)
    done, tokens = finished
    items_per_s = done / window
    remaining = max(row.total - row.completed_count - row.failed_count, 0)
    return {
        "items_per_s": round(items_per_s, 3),
        "tokens_per_s": round(tokens / window, 1),
        "eta_s": round(remaining / items_per_s) if items_per_s > 0 else None,
    }


async def throughputs(conn: Connection, rows: Sequence[AnyRow]) -> dict[str, dict[str, Any]]:
    """The `throughput` of each batch of `rows` that is in progress, by id."""
    running = [row for row in rows if row.status == BatchStatus.IN_PROGRESS]
    if not running:
        return {}
    now = time.time()
    finished = await items.finished_since(conn, [row.id for row in running], now - WINDOW_S)
    return {row.id: pace(row, finished.get(row.id, (0, 0)), now) for row in running}
