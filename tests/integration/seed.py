"""Running batches (and usage events) written straight into the database, for the queue's
integration tests and the finalize benchmark (`bench/finalize.py`)."""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import insert
from sqlalchemy.ext.asyncio import AsyncConnection

from batchgate.services.common.db import Database
from batchgate.services.common.db.schema import batches, items


async def add_batch(
    db: Database,
    batch_id: str,
    n: int,
    *,
    project: str = "proj-a",
    tier: int = 0,
    priority: int = 0,
    age_s: float = 0.0,
    window_s: float = 3600.0,
) -> None:
    created = time.time() - 1000 + age_s  # larger age_s = created later
    async with db.write() as conn:
        await insert_running_batch(
            conn,
            batch_id,
            project_id=project,
            total=n,
            created_at=created,
            expires_at=time.time() + window_s,
            priority_tier=tier,
            priority=priority,
            model="gpt-4o-mini",
        )
        await conn.execute(
            insert(items),
            [
                {
                    "batch_id": batch_id,
                    "idx": i,
                    "line": i + 1,
                    "custom_id": f"{batch_id}-{i}",
                    "state": "queued",
                }
                | {"body": b'{"model":"gpt-4o-mini"}'}
                for i in range(n)
            ],
        )


async def insert_running_batch(
    conn: AsyncConnection,
    batch_id: str,
    *,
    project_id: str,
    total: int,
    created_at: float,
    expires_at: float,
    api_key_id: str = "key",
    input_file_id: str = "file-x",
    **columns: Any,
) -> None:
    """A batch already `in_progress` (any further `batches` columns as keywords), no items."""
    await conn.execute(
        insert(batches).values(
            id=batch_id,
            project_id=project_id,
            api_key_id=api_key_id,
            endpoint="/v1/chat/completions",
            input_file_id=input_file_id,
            completion_window="24h",
            status="in_progress",
            created_at=created_at,
            in_progress_at=created_at,
            expires_at=expires_at,
            total=total,
            **columns,
        )
    )


def usage_event(project: str, batch_id: str, idx: int, cost: float) -> dict[str, Any]:
    """A `usage_events` row of one item (10 tokens in, 5 out), as the recorder writes it."""
    return {
        "created_at": time.time(),
        "source": "batch",
        "project_id": project,
        "api_key_id": "key",
        "batch_id": batch_id,
        "item_idx": idx,
        "model": "gpt-4o-mini",
        "input_tokens": 10,
        "cached_tokens": 0,
        "output_tokens": 5,
        "reasoning_tokens": 0,
        "cost_usd": cost,
    }
