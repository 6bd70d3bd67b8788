"""The `scale` scenario (issue 16, P8): one batch of `--scale-n` small chat items (a million by
default) against the 0 ms simulated upstream, on each of `--databases`, end to end with the
openai SDK (upload, create, run, finalize, download). It reports the wall time of each step,
items/s, CPU seconds per 1,000 items and each process's peak RSS growth over its value when
the upload began (the issue's bound: 64 MiB), and how long one progress read
(`GET /v1/batches/{id}`) took at the start and at the end of the run: a read that grew with
the batch would show here, and the rate of the first and of the last tenth of the items (from
the same reads' counts): a run that slows as it goes shows here. `BATCHGATE_MAX_BATCH_RECORDS`
is raised to the batch's size for the stack it starts (the default stays 50,000)."""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.harness import (
    ProcessMeter,
    bench_stack,
    median,
    print_table,
    sdk_batch,
    simulated_stack_env,
    stack_pids,
    write_chat_input,
)
from tests.support import TERMINAL

READ_EVERY_S = 2.0


class _ProgressReads:
    """Times `GET /v1/batches/{id}` every READ_EVERY_S while the batch runs (its own client)."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self._stop = threading.Event()
        self.times_ms: list[float] = []
        self.done: list[tuple[float, int]] = []
        """(seconds since the create answered, items finished) at each read."""
        self._thread: threading.Thread | None = None

    def follow(self, batch_id: str) -> None:
        self._thread = threading.Thread(target=self._loop, args=(batch_id,), daemon=True)
        self._thread.start()

    def _loop(self, batch_id: str) -> None:
        created = time.perf_counter()
        self.done.append((0.0, 0))
        while not self._stop.wait(READ_EVERY_S):
            started = time.perf_counter()
            batch = self._client.batches.retrieve(batch_id)
            self.times_ms.append((time.perf_counter() - started) * 1000)
            counts = batch.request_counts
            finished = counts.completed + counts.failed if counts else 0
            self.done.append((time.perf_counter() - created, finished))
            if batch.status in TERMINAL:
                return

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def tenth_rates(self, total: int) -> tuple[float | None, float | None]:
        """Items/s over the first tenth of the items (from the create's answer to the first read
        past it) and over the last tenth (from the last read short of it to the end)."""
        if not self.done:
            return None, None
        first = next(((t, n) for t, n in self.done if n >= total / 10), None)
        before_last = [(t, n) for t, n in self.done if n <= total * 0.9][-1]
        end = next(((t, n) for t, n in self.done if n >= total), self.done[-1])
        early = first[1] / first[0] if first and first[0] > 0 else None
        late = (end[1] - before_last[1]) / (end[0] - before_last[0]) if end[0] > before_last[0] else None
        return early, late


def scale(args: argparse.Namespace) -> list[dict[str, Any]]:
    rows = []
    for database in args.databases:
        with tempfile.TemporaryDirectory() as tmp:
            workdir = Path(tmp)
            env = simulated_stack_env(workdir, 0.0, args.concurrency, args.executors)
            env["BATCHGATE_MAX_BATCH_RECORDS"] = str(max(args.scale_n, 50_000))
            with bench_stack(workdir / "stack", database, **env) as stack:
                input_path = write_chat_input(workdir / "in.jsonl", args.scale_n)
                reads = _ProgressReads(stack.client(timeout=120))
                with ProcessMeter(stack_pids(stack), interval_s=0.5) as meter:
                    run = sdk_batch(
                        stack, input_path, workdir / "out.jsonl", poll_s=1.0, on_created=reads.follow
                    )
                reads.stop()
            early, late = reads.tenth_rates(run.items)
            row: dict[str, Any] = {
                "database": database,
                "items": run.items,
                "completed": run.completed,
                "upload_s": run.upload_s,
                "create_s": run.create_s,
                "run_s": run.run_s,
                "download_s": run.download_s,
                "total_s": run.total_s,
                "items/s": run.items_per_s,
                "first tenth items/s": early,
                "last tenth items/s": late,
                "first read ms": reads.times_ms[0] if reads.times_ms else None,
                "median read ms": median(reads.times_ms),
                "last read ms": reads.times_ms[-1] if reads.times_ms else None,
            }
            for name, seconds in sorted(meter.cpu_seconds().items()):
                row[f"{name} cpu s/1k"] = seconds * 1000 / max(run.items, 1)
            for name, growth in sorted(meter.rss_growth_mib().items()):
                row[f"{name} +MiB"] = growth
            rows.append(row)
    print_table("Scale: one large batch end to end, 0 ms upstream", rows)
    return rows
