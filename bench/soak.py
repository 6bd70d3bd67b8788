"""The `soak` scenario (issue 16, "memory stays flat under steady load"): one batch of
`--soak-items` chat items every `--soak-every-s` seconds, alternating between two projects,
against the simulated upstream at `--latency-ms`, for `--soak-minutes`. Every process's RSS is
sampled throughout; after `--soak-warmup-minutes` each process's RSS is the reference, and the
figure that matters is how far it drifts from there (the issue's bound: 32 MiB). A stack that
keeps something per batch or per item once it ended grows here in a straight line.

Batches are created from one thread and followed by another that polls the open ones (a
listing call per round, as a dashboard would), so a batch that never ends shows as open at
the end rather than stalling the load."""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.harness import (
    ProcessMeter,
    bench_stack,
    median,
    print_table,
    simulated_stack_env,
    stack_pids,
    upload_and_create,
    write_chat_input,
)
from tests.support import TERMINAL

PROJECTS = ("default", "other")
SAMPLE_EVERY_S = 5.0


@dataclass
class _Tally:
    """What the load did: batches created, how they ended, create latencies."""

    created: int = 0
    create_errors: int = 0
    ended: dict[str, int] = field(default_factory=dict)
    create_ms: list[float] = field(default_factory=list)
    open_ids: dict[str, str] = field(default_factory=dict)
    """Open batch id → its project."""
    lock: threading.Lock = field(default_factory=threading.Lock)


def _follow(clients: dict[str, Any], tally: _Tally, stop: threading.Event) -> None:
    """Poll the open batches until `stop` is set and none is left open."""
    while True:
        with tally.lock:
            open_ids = dict(tally.open_ids)
        if stop.is_set() and not open_ids:
            return
        for project in PROJECTS:
            clients[project].batches.list(limit=20)
        for batch_id, project in open_ids.items():
            status = clients[project].batches.retrieve(batch_id).status
            if status in TERMINAL:
                with tally.lock:
                    tally.open_ids.pop(batch_id, None)
                    tally.ended[status] = tally.ended.get(status, 0) + 1
        time.sleep(1.0)


def _load(args: argparse.Namespace, clients: dict[str, Any], input_path: Path, tally: _Tally) -> None:
    """Create one batch every `soak_every_s` for `soak_minutes`, projects alternating."""
    deadline = time.monotonic() + args.soak_minutes * 60
    next_at = time.monotonic()
    turn = 0
    while next_at < deadline:
        time.sleep(max(0.0, next_at - time.monotonic()))
        next_at += args.soak_every_s
        project = PROJECTS[turn % len(PROJECTS)]
        turn += 1
        try:
            created = upload_and_create(clients[project], input_path)
        except Exception as exc:  # a failed create is a finding, not a reason to stop the soak
            print(f"  create failed: {exc!r}")
            tally.create_errors += 1
            continue
        with tally.lock:
            tally.created += 1
            tally.create_ms.append((created.upload_s + created.create_s) * 1000)
            tally.open_ids[created.batch.id] = project


def _rss_rows(samples: list[tuple[float, dict[str, int]]], warmup_s: float) -> list[dict[str, Any]]:
    """Per process: RSS after warm-up, its highest and last value later, drift from it."""
    after = [(t, rss) for t, rss in samples if t >= warmup_s]
    if not after:
        return []
    reference = after[0][1]
    rows = []
    for name in sorted(reference):
        values = [rss.get(name, 0) for _t, rss in after]
        rows.append(
            {
                "process": name,
                "after warm-up MiB": reference[name] / 2**20,
                "max MiB": max(values) / 2**20,
                "end MiB": values[-1] / 2**20,
                "max drift MiB": (max(values) - reference[name]) / 2**20,
                "within 32 MiB": (max(values) - reference[name]) / 2**20 <= 32,
            }
        )
    return rows


def _sample(meter: ProcessMeter, stop: threading.Event, samples: list[tuple[float, dict[str, int]]]) -> None:
    started = time.monotonic()
    while not stop.wait(SAMPLE_EVERY_S):
        samples.append((time.monotonic() - started, meter.rss_now()))


def soak(args: argparse.Namespace) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for database in args.databases:
        with tempfile.TemporaryDirectory() as tmp:
            workdir = Path(tmp)
            env = simulated_stack_env(workdir, args.latency_ms, args.concurrency, args.executors)
            with bench_stack(workdir / "stack", database, projects=PROJECTS, **env) as stack:
                input_path = write_chat_input(workdir / "in.jsonl", args.soak_items)
                clients = {p: stack.client(project=p, timeout=120) for p in PROJECTS}
                tally = _Tally()
                stop = threading.Event()
                samples: list[tuple[float, dict[str, int]]] = []
                follower = threading.Thread(target=_follow, args=(clients, tally, stop), daemon=True)
                with ProcessMeter(stack_pids(stack), interval_s=1.0) as meter:
                    sampler = threading.Thread(target=_sample, args=(meter, stop, samples), daemon=True)
                    sampler.start()
                    follower.start()
                    _load(args, clients, input_path, tally)
                    stop.set()
                    follower.join(timeout=300)
                    sampler.join()
            summary = {
                "database": database,
                "batches created": tally.created,
                "create errors": tally.create_errors,
                **{f"ended {k}": v for k, v in sorted(tally.ended.items())},
                "still open": len(tally.open_ids),
                "upload+create p50 ms": median(tally.create_ms),
                "upload+create max ms": max(tally.create_ms, default=float("nan")),
            }
            print_table(f"Soak on {database}: the load", [summary])
            process_rows = _rss_rows(samples, args.soak_warmup_minutes * 60)
            print_table(f"Soak on {database}: RSS per process after warm-up", process_rows)
            rows.append({**summary, "processes": process_rows, "samples": samples})
    return rows
