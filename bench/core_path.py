"""The core's share of every item, without the network: lease and record in one process.

Seeds one running batch of N queued chat items, then repeats what an executor makes the core
do (`Queue.lease` of `--lease` items, then `Recorder.record` of their outcomes, simulator-shaped
answers) until every item is recorded, and reports items/s and CPU seconds per 1,000 items;
`--profile` prints the cProfile of the loop. Issue 16's lever for the end-to-end ratio at
0 ms is the core's CPU per item: this isolates it from gRPC, the executor and HTTP.

    .venv/bin/python -m bench.core_path --items 20000 [--database-url …] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time

from batchgate.internal.v1 import items_pb2, recorder_pb2
from batchgate.services.common.db import Database
from batchgate.services.common.loading import load_settings
from batchgate.services.results.recorder import Recorder
from batchgate.services.scheduler.queue import Queue, Request
from batchgate.services.scheduler.work_signal import WorkSignal
from bench.micro import answer, run_on, seed_batch

SEED_CHUNK = 5000
BODY = b'{"model":"gpt-4o-mini","messages":[{"role":"user","content":"bench message 1"}]}'


async def seed(db: Database, n: int) -> str:
    return await seed_batch(
        db,
        n,
        lambda batch, i: (
            {"batch_id": batch, "idx": i, "line": i + 1, "custom_id": f"req-{i}", "state": "queued"}
            | {"body": BODY}
        ),
    )


def _outcome(lease: object) -> recorder_pb2.Outcome:
    ref = items_pb2.ItemRef(batch_id=lease.batch_id, index=lease.index, attempt=lease.attempt)  # type: ignore[attr-defined]
    outcome = recorder_pb2.Outcome(
        ref=ref,
        state=recorder_pb2.OUTCOME_STATE_SUCCEEDED,
        status_code=200,
        response_body=answer(ref.index),
        request_id=f"req_{ref.index}",
        model="gpt-4o-mini",
        provider="simulated",
        attempts=1,
        latency_ms=3,
    )
    outcome.usage.prompt_tokens, outcome.usage.completion_tokens = 12, 6
    return outcome


async def run(url: str, n: int, lease_size: int, profile: bool) -> None:
    settings = load_settings(environ={})
    db = Database(url)
    try:
        await seed(db, n)
        queue, recorder = Queue(db, 30.0, signal=WorkSignal()), Recorder(settings, db)
        profiler = cProfile.Profile() if profile else None
        done = 0
        cpu, wall = time.process_time(), time.perf_counter()
        if profiler:
            profiler.enable()
        while done < n:
            leases = await queue.lease("exec-bench", lease_size, Request(request_id=f"r{done}"))
            if not leases:
                break
            summary = await recorder.record([_outcome(lease) for lease in leases])
            done += summary.accepted
        if profiler:
            profiler.disable()
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        print(
            f"{db.dialect}: {done} items leased and recorded in {wall:.2f} s ({done / wall:,.0f}/s), "
            f"{cpu * 1000 / max(done, 1):.3f} CPU s per 1,000 items (lease size {lease_size})"
        )
        if profiler:
            pstats.Stats(profiler).sort_stats("tottime").print_stats(30)
    finally:
        await db.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--items", type=int, default=20_000)
    parser.add_argument("--lease", type=int, default=64, help="items per lease (and record) call")
    parser.add_argument("--database-url", default="")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    run_on(args.database_url, lambda url: run(url, args.items, args.lease, args.profile))


if __name__ == "__main__":
    main()
