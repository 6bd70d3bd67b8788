"""The benchmark scenarios (issue 7). Each prints a table and saves a JSON record."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import httpx
import openai
import orjson

from bench.direct import run_direct
from bench.fast_upstream import fast_upstream
from bench.harness import (
    ProcessMeter,
    bench_stack,
    median,
    print_table,
    provider_config,
    save,
    sdk_batch,
    simulated_stack_env,
    stack_pids,
    upload_and_create,
    write_chat_input,
)
from bench.profiler import profiling, summarise
from bench.promises import cancel, capacity, expedite, kill
from bench.reads import reads
from bench.scale import scale
from bench.soak import soak
from bench.tools import tools
from tests.otlp_sink import OtlpSink
from tests.support import TERMINAL, RunningStack, free_port


def _direct(
    input_path: Path, workdir: Path, upstream: str, concurrency: int, transport: str
) -> tuple[float, float]:
    """The direct client's items/s and its CPU seconds per 1,000 items (it runs in this process)."""
    started, cpu = time.perf_counter(), time.process_time()
    count = asyncio.run(
        run_direct(input_path, workdir / f"direct-{transport}.jsonl", upstream, concurrency, transport)
    )
    return count / (time.perf_counter() - started), (time.process_time() - cpu) * 1000 / count


# --- 1. throughput vs a direct client ---------------------------------------------------------------


def throughput(args: argparse.Namespace) -> list[dict[str, Any]]:
    rows = []
    for database, latency in itertools.product(args.databases, args.latencies):
        with tempfile.TemporaryDirectory() as tmp:
            workdir = Path(tmp)
            env = simulated_stack_env(workdir, latency, args.concurrency, args.executors)
            with bench_stack(workdir / "stack", database, **env) as stack:
                upstream = f"http://127.0.0.1:{stack.settings.simulator_port}/v1"
                input_path = write_chat_input(workdir / "in.jsonl", args.n)
                rates: dict[str, list[float]] = {name: [] for name in [*args.baselines, "batchgate"]}
                cpu: dict[str, list[float]] = defaultdict(list)  # CPU s per 1,000 items, per process
                for run in range(args.runs):
                    steps = [*args.baselines, "batchgate"]
                    for step in steps if run % 2 == 0 else reversed(steps):
                        if step != "batchgate":
                            rate, cpu_1k = _direct(input_path, workdir, upstream, args.concurrency, step)
                            rates[step].append(rate)
                            cpu[step].append(cpu_1k)
                            continue
                        with ProcessMeter(stack_pids(stack)) as meter:
                            done = sdk_batch(stack, input_path, workdir / "out.jsonl")
                        rates[step].append(done.items_per_s)
                        for name, seconds in meter.cpu_seconds().items():
                            cpu[name].append(seconds * 1000 / done.items)
                b = median(rates["batchgate"])
                row: dict[str, Any] = {
                    "database": database,
                    "latency_ms": latency,
                    "items": args.n,
                    "concurrency": args.concurrency,
                }
                for name in args.baselines:
                    row[f"A {name}/s"] = median(rates[name])
                row["B batchgate/s"] = b
                for name in args.baselines:
                    row[f"B/A({name})"] = b / median(rates[name])
                for name, values in sorted(cpu.items()):
                    row[f"{name} cpu s/1k"] = median(values)
                row["runs"] = args.runs
                rows.append(row)
    print_table("Throughput: batchgate end to end vs a direct client (median of runs)", rows)
    return rows


# --- 2. headroom: an upstream that is never the bottleneck ------------------------------------------


def headroom(args: argparse.Namespace) -> list[dict[str, Any]]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        with fast_upstream(workdir, free_port(), free_port()) as upstream:
            config = provider_config(workdir, "fast", upstream, args.headroom_concurrency)
            env = {
                "BATCHGATE_CONFIG": str(config),
                "BATCHGATE_EXECUTOR_CONCURRENCY": str(args.headroom_concurrency),
                "BATCHGATE_EXECUTORS": str(args.executors),
                "BATCHGATE_LOG_LEVEL": "WARNING",
            }
            input_path = write_chat_input(workdir / "in.jsonl", args.n)
            direct = median(
                [
                    _direct(input_path, workdir, upstream, args.headroom_concurrency, "aiohttp")[0]
                    for _ in range(args.runs)
                ]
            )
            with bench_stack(workdir / "stack", **env) as stack:
                for run_number in range(args.runs):
                    profiled = args.profile and run_number == args.runs - 1
                    with contextlib.ExitStack() as measuring:
                        meter = measuring.enter_context(ProcessMeter(stack_pids(stack)))
                        if profiled:
                            pids = {n: p for n, p in stack_pids(stack).items() if n != "envoy"}
                            raw = measuring.enter_context(profiling(pids, workdir / "profiles"))
                        run = sdk_batch(stack, input_path, workdir / "out.jsonl")
                    if profiled:
                        profiles = {name: summarise(path) for name, path in raw.items()}
                        _print_profiles(profiles)
                    row: dict[str, Any] = {
                        "items": run.items,
                        "batchgate/s": run.items_per_s,
                        "direct(aiohttp)/s": direct,
                        "create_s": run.create_s,
                        "run_s": run.run_s,
                    }
                    for name, seconds in sorted(meter.cpu_seconds().items()):
                        row[f"{name} cpu s/1k"] = seconds * 1000 / run.items
                    rows.append(row)
    print_table("Headroom: batchgate's own ceiling against an instant upstream (Envoy direct_response)", rows)
    if args.profile:
        rows.append({"profiles": profiles})
    return rows


def _print_profiles(profiles: dict[str, dict[str, Any]]) -> None:
    for name, summary in profiles.items():
        print(f"\nProfile of {name} ({summary['samples']} samples): top self time")
        for frame, share in summary["self"]:
            print(f"  {share:5.1f}%  {frame}")
        print(f"  time under our modules ({name}):")
        for module, share in summary["modules"]:
            print(f"  {share:5.1f}%  {module}")


# --- 3. ingest ---------------------------------------------------------------------------------------


def ingest(args: argparse.Namespace) -> list[dict[str, Any]]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        env = {"BATCHGATE_EXECUTORS": "0", "BATCHGATE_LOG_LEVEL": "WARNING"}
        with bench_stack(workdir / "stack", **env) as stack:
            client = stack.client(timeout=1800)
            for lines in args.sizes:
                input_path = write_chat_input(workdir / f"in-{lines}.jsonl", lines, pad_bytes=args.line_bytes)
                size_mb = input_path.stat().st_size / 1e6
                parse_started = time.perf_counter()
                with input_path.open("rb") as handle:
                    for line in handle:
                        orjson.loads(line)
                parse_s = time.perf_counter() - parse_started
                with ProcessMeter(stack_pids(stack)) as meter:
                    created = upload_and_create(client, input_path)
                _cancel(client, created.batch.id)
                rss = meter.peak_rss_mib()
                growth = meter.rss_growth_mib()
                rows.append(
                    {
                        "lines": lines,
                        "MB": round(size_mb, 1),
                        "upload_s": created.upload_s,
                        "create_s": created.create_s,
                        "lines/s": lines / (created.upload_s + created.create_s),
                        "parse-only_s": parse_s,
                        "create/parse": created.create_s / parse_s,
                        "core peak MiB": rss.get("core"),
                        "envoy peak MiB": rss.get("envoy"),
                        "core +MiB": growth.get("core"),
                        "envoy +MiB": growth.get("envoy"),
                    }
                )
            inline = _inline_create(stack, client, workdir, args) if args.inline_lines else None
    print_table("Ingest: upload + create, next to a bare orjson parse loop", rows)
    if inline is not None:
        print_table("Ingest: create with inline requests (one JSON body, no upload)", [inline])
        rows.append(inline)
    return rows


def _cancel(client: Any, batch_id: str, attempts: int = 5) -> None:
    """Cancel a measured batch so it does not run; the cancel of a large batch can outlast the
    scheduler call's deadline on a busy machine (503, "retry the cancel"), so retry it."""
    for attempt in range(attempts):
        try:
            client.batches.cancel(batch_id)
            return
        except openai.InternalServerError:
            if attempt == attempts - 1:
                raise
            time.sleep(2)


def _inline_create(stack: Any, client: Any, workdir: Path, args: argparse.Namespace) -> dict[str, Any]:
    """One create whose records travel in the JSON body (`requests`), as the API's extension
    allows up to `max_inline_bytes`: the path where the body is decoded record by record."""
    path = write_chat_input(workdir / "inline.jsonl", args.inline_lines, pad_bytes=args.line_bytes)
    records = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    with ProcessMeter(stack_pids(stack)) as meter:
        started = time.perf_counter()
        batch = client.batches.create(
            input_file_id="",
            endpoint="/v1/chat/completions",
            completion_window="24h",
            extra_body={"requests": records},
        )
        create_s = time.perf_counter() - started
    _cancel(client, batch.id)
    rss = meter.peak_rss_mib()
    return {
        "lines": args.inline_lines,
        "MB": round(path.stat().st_size / 1e6, 1),
        "inline create_s": create_s,
        "lines/s": args.inline_lines / create_s,
        "core peak MiB": rss.get("core"),
        "envoy peak MiB": rss.get("envoy"),
    }


# --- 4. latency to first result, finalize time ---------------------------------------------------------


def latency(args: argparse.Namespace) -> list[dict[str, Any]]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        env = simulated_stack_env(workdir, args.latency_ms, args.concurrency, args.executors)
        with bench_stack(workdir / "stack", **env) as stack:
            client = stack.client(timeout=1800)
            input_path = write_chat_input(workdir / "in.jsonl", args.n)
            created_batch = upload_and_create(client, input_path)
            batch = created_batch.batch
            created = time.perf_counter()
            first = settled = None
            http = httpx.Client(base_url=stack.base_url, headers={"Authorization": f"Bearer {stack.key}"})
            while True:
                raw = http.get(f"/batches/{batch.id}").json()
                now = time.perf_counter()
                counts = raw["request_counts"]
                done = counts["completed"] + counts["failed"]
                if first is None and done >= 1:
                    first = now
                if settled is None and done >= counts["total"]:
                    settled = now
                if raw["status"] in TERMINAL:
                    ended = now
                    break
                time.sleep(0.02)
            rows.append(
                {
                    "items": args.n,
                    "create_s": created_batch.create_s,
                    "first_result_s": (first or ended) - created,
                    "all_items_s": (settled or ended) - created,
                    "finalize_s": ended - (settled or ended),
                    "finalizing_at→completed_at": raw["completed_at"] - raw["finalizing_at"],
                }
            )
    print_table("Latency to first result and finalize time (polled every 20 ms)", rows)
    return rows


# --- 5. scale-out ------------------------------------------------------------------------------------


def scaleout(args: argparse.Namespace) -> list[dict[str, Any]]:
    rows = []
    for db_kind in args.databases:
        for executors in args.executor_counts:
            with tempfile.TemporaryDirectory() as tmp:
                workdir = Path(tmp)
                env = simulated_stack_env(workdir, args.latency_ms, args.concurrency, executors)
                with bench_stack(workdir / "stack", db_kind, **env) as stack:
                    input_path = write_chat_input(workdir / "in.jsonl", args.n)
                    rates = [
                        sdk_batch(stack, input_path, workdir / "out.jsonl").items_per_s
                        for _ in range(args.runs)
                    ]
            rows.append(
                {
                    "database": db_kind,
                    "executors": executors,
                    "items": args.n,
                    "latency_ms": args.latency_ms,
                    "batchgate/s": median(rates),
                }
            )
    print_table("Scale-out: executors and database", rows)
    return rows


# --- 6. tracing cost ---------------------------------------------------------------------------------


def tracing(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Telemetry off; OTLP metrics alone (`OTEL_TRACES_EXPORTER=none`: what the traced stacks
    pay for metrics, which the same endpoint switches on); tracing on with no item sampled
    (what every unsampled item costs); on for every item (OTLP to an in-process sink). The
    stacks are up at once and runs alternate; tracing's own cost is traced against metrics
    only."""
    variants: tuple[tuple[str, dict[str, str] | None], ...] = (
        ("off", None),
        ("metrics only", {"OTEL_TRACES_EXPORTER": "none"}),
        ("sampling 0", {"BATCHGATE_TRACE_SAMPLE_RATIO": "0"}),
        ("sampling 1.0", {"BATCHGATE_TRACE_SAMPLE_RATIO": "1.0"}),
    )
    port = free_port()
    sink = OtlpSink(port, keep=False)  # counts only: decoding spans would take the stacks' CPU
    with tempfile.TemporaryDirectory() as tmp, sink, contextlib.ExitStack() as stacks:
        workdir = Path(tmp)
        running = {}
        for label, telemetry in variants:
            (workdir / label).mkdir()
            env = simulated_stack_env(workdir / label, args.latency_ms, args.concurrency, args.executors)
            if telemetry is not None:
                env.update(
                    {
                        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}",
                        "OTEL_EXPORTER_OTLP_INSECURE": "true",
                        **telemetry,
                    }
                )
            running[label] = stacks.enter_context(bench_stack(workdir / label / "stack", **env))
        input_path = write_chat_input(workdir / "in.jsonl", args.n)
        per_process: dict[str, list[dict[str, float]]] = {label: [] for label in running}
        rates, cpu = _alternate(running, input_path, workdir, args.runs, per_process)
        time.sleep(1)
        rows = [
            {
                "telemetry": label,
                "items": args.n,
                "batchgate/s": median(rates[label]),
                "vs off": median(rates[label]) / median(rates["off"]),
                "vs metrics only": median(rates[label]) / median(rates["metrics only"]),
                "cpu s/1k": median(cpu[label]),
                **{
                    f"{name} cpu s/1k": median(run[name] for run in per_process[label])
                    for name in sorted(per_process[label][0])
                },
                "runs/s": " ".join(f"{r:.0f}" for r in rates[label]),
                "spans received": sink.span_count if label == variants[-1][0] else "",
            }
            for label in running
        ]
    print_table("Tracing cost: telemetry off, metrics only, no item sampled, every item traced", rows)
    return rows


def _alternate(
    running: dict[str, RunningStack],
    input_path: Path,
    workdir: Path,
    runs: int,
    per_process: dict[str, list[dict[str, float]]] | None = None,
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """`runs` rounds of the same batch on each stack, the order reversed every other round:
    items/s and CPU seconds per 1,000 items (the whole stack) of each run, per stack; and,
    into `per_process` when given, each run's CPU seconds per 1,000 items of each process
    (where a stack's cost moved: core, executor, Envoy, simulator)."""
    rates: dict[str, list[float]] = {label: [] for label in running}
    cpu: dict[str, list[float]] = {label: [] for label in running}
    for run_number in range(runs):
        for label in list(running) if run_number % 2 == 0 else list(reversed(running)):
            with ProcessMeter(stack_pids(running[label])) as meter:
                run = sdk_batch(running[label], input_path, workdir / f"out-{label}.jsonl")
            rates[label].append(run.items_per_s)
            seconds = meter.cpu_seconds()
            cpu[label].append(sum(seconds.values()) * 1000 / run.items)
            if per_process is not None:
                per_process[label].append({name: s * 1000 / run.items for name, s in seconds.items()})
    return rates, cpu


# --- 7. internal TLS cost ----------------------------------------------------------------------------


def internal_tls(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Throughput with mutual TLS between the processes (the default) vs plaintext
    (`BATCHGATE_INSECURE_INTERNAL`), both stacks up at once, runs alternating between them."""
    rows = []
    for latency in args.latencies:
        with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stacks:
            workdir = Path(tmp)
            input_path = write_chat_input(workdir / "in.jsonl", args.n)
            running = {}
            for label, insecure in (("tls", "false"), ("plaintext", "true")):
                (workdir / label).mkdir()
                env = simulated_stack_env(workdir / label, latency, args.concurrency, args.executors)
                env["BATCHGATE_INSECURE_INTERNAL"] = insecure
                running[label] = stacks.enter_context(bench_stack(workdir / label / "stack", **env))
            rates, cpu = _alternate(running, input_path, workdir, args.runs)
            tls_rate, plain_rate = median(rates["tls"]), median(rates["plaintext"])
            rows.append(
                {
                    "latency_ms": latency,
                    "items": args.n,
                    "mutual TLS/s": tls_rate,
                    "plaintext/s": plain_rate,
                    "TLS/plaintext": tls_rate / plain_rate,
                    "TLS cpu s/1k": median(cpu["tls"]),
                    "plaintext cpu s/1k": median(cpu["plaintext"]),
                    "TLS runs/s": " ".join(f"{r:.0f}" for r in rates["tls"]),
                    "plaintext runs/s": " ".join(f"{r:.0f}" for r in rates["plaintext"]),
                }
            )
    print_table("Internal mutual TLS: throughput with and without (median of alternating runs)", rows)
    return rows


SCENARIOS = {
    "throughput": throughput,
    "headroom": headroom,
    "ingest": ingest,
    "latency": latency,
    "scaleout": scaleout,
    "tracing": tracing,
    "internal_tls": internal_tls,
    "capacity": capacity,
    "expedite": expedite,
    "cancel": cancel,
    "kill": kill,
    "tools": tools,
    "scale": scale,
    "reads": reads,
    "soak": soak,
}


def run(name: str, args: argparse.Namespace) -> Path:
    params = {k: v for k, v in vars(args).items() if k not in ("func", "scenario")}
    figures = SCENARIOS[name](args)
    path = save(name, params, figures)
    print(f"  saved {path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path}")
    return path
