"""How long `finalizing` takes: write the output and error files of one large batch.

Seeds a fresh database with one batch of N finished items (simulator-shaped chat completion
bodies, a share of them failed), then times `Finalizer.finalize` on it, and profiles it with
`--profile`. Runs on SQLite by default; `--database-url postgresql+asyncpg://…` for PostgreSQL
(the database must exist and be empty).

    .venv/bin/python -m bench.finalize --items 50000 [--failed-share 0.1] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time

from sqlalchemy import select

from batchgate.services.common.db import Database, batches, files
from batchgate.services.common.db.schema import blob_chunks
from batchgate.services.common.loading import load_settings
from batchgate.services.results.finalize import Finalizer
from bench.micro import answer, run_on, seed_batch

SEED_CHUNK = 5000


def _item(batch: str, i: int, failed_every: int) -> dict[str, object]:
    row: dict[str, object] = {
        "batch_id": batch,
        "idx": i,
        "line": i + 1,
        "custom_id": f"bench-{i}",
        "state": "succeeded",
        "body": b'{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}',
        "status_code": 200,
        "response": answer(i, words=40),
        "request_id": f"req_{i}",
        "error_code": None,
        "error_message": None,
        "finished_at": time.time(),
    }
    if failed_every and i % failed_every == 0:
        row.update(
            state="failed",
            status_code=None,
            response=None,
            error_code="request_timeout",
            error_message="The upstream did not answer within 600 s.",
        )
    return row


async def seed(db: Database, n: int, failed_share: float) -> str:
    failed_every = round(1 / failed_share) if failed_share else 0
    failed = len(range(0, n, failed_every)) if failed_every else 0
    return await seed_batch(
        db,
        n,
        lambda batch, i: _item(batch, i, failed_every),
        completed_count=n - failed,
        failed_count=failed,
    )


async def run(url: str, n: int, failed_share: float, profile: bool) -> None:
    settings = load_settings(environ={})
    db = Database(url)
    try:
        batch = await seed(db, n, failed_share)
        finalizer = Finalizer(settings, db)
        profiler = cProfile.Profile() if profile else None
        started = time.perf_counter()
        if profiler:
            profiler.enable()
        status = await finalizer.finalize(batch)
        if profiler:
            profiler.disable()
        elapsed = time.perf_counter() - started
        async with db.read() as conn:
            row = await batches.get(conn, batch)
            sizes = {f.id: f.bytes for f in await files.of_batch(conn, batch)}
            chunks = len((await conn.execute(select(blob_chunks.c.seq))).all())
        print(
            f"{db.dialect}: finalize of {n} items → {status} in {elapsed:.2f} s "
            f"(finalizing_at→completed_at {row.completed_at - row.finalizing_at:.2f} s); "
            f"files {sizes}, {chunks} chunks"
        )
        if profiler:
            pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)
    finally:
        await db.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--items", type=int, default=50_000)
    parser.add_argument("--failed-share", type=float, default=0.1)
    parser.add_argument("--database-url", default="")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    run_on(args.database_url, lambda url: run(url, args.items, args.failed_share, args.profile))


if __name__ == "__main__":
    main()
