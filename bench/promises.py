"""Scenarios for the execution promises (issue 11), measured where a user sees them: at an
upstream that records when each call starts (`tests/fake_upstream.py`).

- `capacity`: an upstream that serves 16 calls at once (50 ms each) and answers 429 beyond,
  provider `max_concurrency` 64: the fraction of the cap's throughput reached, the share of
  429s, failed items; without and with `Retry-After: 1`.
- `expedite`: a 20-item expedited batch created behind a running standard backlog (`--n`):
  time from its create to its first and last upstream call, and standard calls that started
  in between.
- `cancel`: 300 items of 0.5 s behind 16 provider slots, cancelled after 32 finished: how long
  after the cancel answered calls still started, and how the items ended.
- `kill`: `kill -9` of the only executor at 30% of `--capped-n` items (50 ms, 64 at once),
  restarted at once: kill to first call of the new executor, restart to batch end, items run
  twice against items in flight; on SQLite and PostgreSQL (with the session table's writes
  per second there, the lease-renewal load).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
from sqlalchemy import text

from batchgate.services.common.db import Database
from bench.harness import bench_stack, print_table
from tests.execution_support import create_batch
from tests.fake_upstream import Call, FakeUpstream, catalogue, records
from tests.support import TERMINAL, RunningStack


@contextlib.contextmanager
def _stack_on(
    workdir: Path, upstream: FakeUpstream, concurrency: int, db_kind: str = "sqlite", **env: str
) -> Iterator[RunningStack]:
    provider = {"base_url": upstream.base_url, "max_concurrency": concurrency}
    config = catalogue(workdir / "catalogue.yaml", {"fake": provider})
    with bench_stack(
        workdir / "stack", db_kind, BATCHGATE_CONFIG=config, BATCHGATE_LOG_LEVEL="WARNING", **env
    ) as stack:
        yield stack


def _wait(stack: RunningStack, batch_id: str, timeout_s: float = 900) -> Any:
    client = stack.client()
    deadline = time.monotonic() + timeout_s
    while (batch := client.batches.retrieve(batch_id)).status not in TERMINAL:
        if time.monotonic() > deadline:
            raise TimeoutError(f"batch {batch_id} still {batch.status}")
        time.sleep(0.05)
    return batch


def _calls(upstream: FakeUpstream, prefix: str) -> list[Call]:
    return [c for c in upstream.calls() if c.content.startswith(prefix + "-")]


def _until(what: str, check: Any, timeout_s: float = 300, every_s: float = 0.01) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(every_s)


# --- capacity ---------------------------------------------------------------------------------------


def capacity(args: argparse.Namespace) -> list[dict[str, Any]]:
    rows = []
    n, slots, latency_s = args.capped_n, 16, 0.05
    for retry_after in (None, 1.0):
        with tempfile.TemporaryDirectory() as tmp, FakeUpstream(latency_s, slots, retry_after) as upstream:
            with _stack_on(Path(tmp), upstream, concurrency=64) as stack:
                done = _wait(stack, create_batch(stack, records("fake", "cap", n)).id)
            calls = _calls(upstream, "cap")
            served = [c for c in calls if c.status == 200]
            span = max(c.ended or c.started for c in served) - min(c.started for c in calls)
            limited = sum(1 for c in calls if c.status == 429)
            rows.append(
                {
                    "Retry-After": "none" if retry_after is None else f"{retry_after:g}s",
                    "items": n,
                    "cap items/s": slots / latency_s,
                    "items/s": len(served) / span,
                    "fraction of cap": n / slots * latency_s / span,
                    "calls": len(calls),
                    "429s": limited,
                    "429 share": limited / len(calls),
                    "failed": done.request_counts.failed,
                }
            )
    print_table(f"Capacity: an upstream serving {slots} at once ({latency_s * 1000:g} ms), 429 beyond", rows)
    return rows


# --- expedite ---------------------------------------------------------------------------------------


def expedite(args: argparse.Namespace) -> list[dict[str, Any]]:
    backlog, latency_s = args.n, 0.05
    with (
        tempfile.TemporaryDirectory() as tmp,
        FakeUpstream(latency_s) as upstream,
        _stack_on(Path(tmp), upstream, concurrency=args.concurrency) as stack,
    ):
        standard = create_batch(stack, records("fake", "std", backlog))
        _until("the backlog runs", lambda: len(upstream.calls()) >= min(1000, backlog // 4))
        asked = time.time()
        expedited = create_batch(stack, records("fake", "exp", 20), priority="expedited")
        answered = time.time()
        _wait(stack, expedited.id)
        with contextlib.suppress(openai.ConflictError):  # a small backlog may be done already
            stack.client().batches.cancel(standard.id)
        _wait(stack, standard.id)
    exp = sorted(c.started for c in _calls(upstream, "exp"))
    overtaking = [c for c in _calls(upstream, "std") if exp[0] < c.started < exp[-1]]
    held = sum(1 for c in _calls(upstream, "std") if c.started < asked)
    rows = [
        {
            "standard backlog": backlog,
            "standard calls before": held,
            "create s": answered - asked,
            "create answered → first call s": exp[0] - answered,
            "create asked → first call s": exp[0] - asked,
            "first → last expedited call s": exp[-1] - exp[0],
            "standard calls in between": len(overtaking),
        }
    ]
    print_table(
        f"Expedite: 20 expedited items behind a standard backlog ({latency_s * 1000:g} ms upstream, "
        f"provider concurrency {args.concurrency})",
        rows,
    )
    return rows


# --- cancel -----------------------------------------------------------------------------------------


def cancel(args: argparse.Namespace) -> list[dict[str, Any]]:
    with (
        tempfile.TemporaryDirectory() as tmp,
        FakeUpstream(0.5) as upstream,
        _stack_on(Path(tmp), upstream, concurrency=16) as stack,
    ):
        client = stack.client()
        batch = create_batch(stack, records("fake", "cn", 300))
        _until(
            "32 done",
            lambda: client.batches.retrieve(batch.id).request_counts.completed >= 32,
            every_s=0.02,
        )
        client.batches.cancel(batch.id)
        answered = time.time()
        done = _wait(stack, batch.id)
    starts = [c.started for c in _calls(upstream, "cn")]
    after = [s - answered for s in starts if s > answered]
    rows = [
        {
            "items": 300,
            "calls": len(starts),
            "calls after cancel answered": len(after),
            "cancel → last call s": max(after) if after else 0.0,
            "results": done.request_counts.completed,
            "cancelled": done.request_counts.failed,
        }
    ]
    print_table("Cancel: 300 items of 0.5 s, 16 at once, cancelled after 32 finished", rows)
    return rows


# --- kill ---------------------------------------------------------------------------------------------


async def _session_writes(url: str) -> int:
    db = Database(url)
    try:
        async with db.read() as conn:
            row = (
                await conn.execute(
                    text(
                        "SELECT coalesce(sum(n_tup_upd + n_tup_ins), 0) FROM pg_stat_user_tables "
                        "WHERE relname = 'executor_sessions'"
                    )
                )
            ).scalar()
            return int(row or 0)
    finally:
        await db.dispose()


def kill(args: argparse.Namespace) -> list[dict[str, Any]]:
    rows = []
    n, latency_s, concurrency = args.capped_n, 0.05, 64
    for db_kind in args.databases:
        with (
            tempfile.TemporaryDirectory() as tmp,
            FakeUpstream(latency_s) as upstream,
            _stack_on(Path(tmp), upstream, concurrency, db_kind) as stack,
        ):
            writes_before = asyncio.run(_session_writes(stack.database_url)) if db_kind == "postgres" else 0
            started = time.time()
            batch = create_batch(stack, records("fake", "k", n))
            _until("30% answered", lambda: len(upstream.calls()) >= 0.3 * n)
            (child,) = [c for c in stack.stack.children if c.name == "executor-0"]
            assert child.process is not None
            os.kill(child.process.pid, signal.SIGKILL)
            killed = time.time()
            stack.stack.stop_child(child)
            stack.stack.children.remove(child)
            stack.stack.start_executor(0)
            restarted = time.time()
            _wait(stack, batch.id)
            ended = time.time()
            time.sleep(0.6)  # PostgreSQL's statistics lag a little
            writes = (
                asyncio.run(_session_writes(stack.database_url)) - writes_before
                if db_kind == "postgres"
                else 0
            )
        calls = upstream.calls()
        twice = [k for k, count in Counter(c.content for c in calls).items() if count > 1]
        before = [c for c in calls if c.started < killed]
        in_flight = [c for c in before if c.ended is None or c.ended >= killed]
        resumed = min((c.started for c in calls if c.started > restarted), default=ended)
        repeated = set(twice)
        rerun = min(
            (c.started for c in calls if c.started > restarted and c.content in repeated), default=ended
        )
        row: dict[str, Any] = {
            "database": db_kind,
            "items": n,
            "kill → restart s": restarted - killed,
            "restart → first call s": resumed - restarted,
            "kill → dead executor's items run again s": rerun - killed,
            "kill → batch end s": ended - killed,
            "in flight at kill": len(in_flight),
            "ran twice": len(twice),
        }
        row["session writes/s"] = writes / (ended - started) if db_kind == "postgres" else "-"
        rows.append(row)
    print_table(
        f"Kill: kill -9 of the only executor at 30% of {n} items ({latency_s * 1000:g} ms, "
        f"{concurrency} at once), restarted at once",
        rows,
    )
    return rows
