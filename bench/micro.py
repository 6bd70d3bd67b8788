"""What the in-process micro-benchmarks (`bench.finalize`, `bench.core_path`) share: a fresh
database with one running batch whose items they insert, simulator-shaped answers, and
running on the given database URL or on a SQLite file of their own."""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Callable, Coroutine, Iterable
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import insert

from batchgate.services.common import auth
from batchgate.services.common.db import Database
from batchgate.services.common.db.migrate import migrate
from batchgate.services.common.db.schema import items
from batchgate.services.common.ids import batch_id as new_batch_id
from tests.integration.seed import insert_running_batch

SEED_CHUNK = 5000


def answer(i: int, words: int = 0) -> bytes:
    """A chat completion as the simulator answers item `i`, `words` words of filler long."""
    text = f"Simulated answer {i:012x} to: bench message {i}" + " lorem ipsum" * (words // 2)
    tokens = 6 + words
    return orjson.dumps(
        {
            "id": f"chatcmpl-{i:024x}",
            "object": "chat.completion",
            "created": 1_767_225_600,
            "model": "gpt-4o-mini",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text, "refusal": None},
                    "logprobs": None,
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 12, "completion_tokens": tokens, "total_tokens": 12 + tokens},
            "system_fingerprint": "fp_sim",
        }
    )


async def seed_batch(db: Database, n: int, item: Callable[[str, int], dict[str, Any]], **counts: int) -> str:
    """Migrate `db`, add one running batch of `n` items (`item(batch_id, index)` is each row,
    inserted in chunks) with the batch row's `counts`; returns the batch id."""
    await migrate(db)
    project = await auth.ensure_project(db)
    batch = new_batch_id()
    now = time.time()
    async with db.write() as conn:
        await insert_running_batch(
            conn,
            batch,
            project_id=project,
            api_key_id="key_bench",
            input_file_id="file-bench",
            total=n,
            created_at=now,
            expires_at=now + 86400,
            model="gpt-4o-mini",
            **counts,
        )
    for start in range(0, n, SEED_CHUNK):
        rows: Iterable[dict[str, Any]] = (item(batch, i) for i in range(start, min(n, start + SEED_CHUNK)))
        async with db.write() as conn:
            await conn.execute(insert(items), list(rows))
    return batch


def run_on(database_url: str, run: Callable[[str], Coroutine[Any, Any, None]]) -> None:
    """`run(url)` on `database_url`, or on a new SQLite file when it is empty."""
    if database_url:
        asyncio.run(run(database_url))
        return
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(run(f"sqlite+aiosqlite:///{Path(tmp) / 'bench.db'}"))
