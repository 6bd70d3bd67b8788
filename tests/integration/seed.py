"""Queued batches written straight into the database, for the queue's integration tests."""

from __future__ import annotations

import time

from sqlalchemy import insert

from services.common.db import Database
from services.common.db.schema import batches, items


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
        await conn.execute(
            insert(batches).values(
                id=batch_id,
                project_id=project,
                api_key_id="key",
                endpoint="/v1/chat/completions",
                input_file_id="file-x",
                completion_window="24h",
                status="in_progress",
                created_at=created,
                in_progress_at=created,
                expires_at=time.time() + window_s,
                priority_tier=tier,
                priority=priority,
                total=n,
                model="gpt-4o-mini",
            )
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
