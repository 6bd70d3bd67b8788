"""Results' spend sums (what SpendService answers ingest's budget checks with), on a real database."""

from __future__ import annotations

import time

from sqlalchemy import insert

from batchgate.services.common.db import Database
from batchgate.services.common.db.schema import usage_events
from batchgate.services.results.spend import spend_usd


def _event(project: str, key: str, cost: float, idx: int) -> dict[str, object]:
    return {
        "created_at": time.time(),
        "source": "batch",
        "project_id": project,
        "api_key_id": key,
        "batch_id": "batch_x",
        "item_idx": idx,
        "model": "gpt-4o-mini",
        "input_tokens": 1,
        "cached_tokens": 0,
        "output_tokens": 1,
        "reasoning_tokens": 0,
        "cost_usd": cost,
    }


async def test_spend_sums_a_projects_and_a_keys_usage(db: Database) -> None:
    assert await spend_usd(db, "p1", "k1") == (0.0, 0.0)
    async with db.write() as conn:
        await conn.execute(
            insert(usage_events),
            [
                _event("p1", "k1", 0.25, 0),
                _event("p1", "k1", 0.5, 1),
                _event("p1", "k2", 1.0, 2),
                _event("p2", "k3", 8.0, 3),
            ],
        )
    assert await spend_usd(db, "p1", "k1") == (1.75, 0.75)
    assert await spend_usd(db, "p1", "k3") == (1.75, 0.0)  # another project's key counts nothing here
    assert await spend_usd(db, "p1") == (1.75, 0.0)
