"""The `reads` scenario (issue 16, P9: reads never starve execution).

A batch of `--read-n` items runs against the simulated upstream at 50 ms, alone ("quiet") and
while `--pollers` closed-loop clients read through Envoy with the API key: each sends
`GET /v1/batches/{id}`, every fourth request `GET /v1/batches?limit=20` instead, and sends
the next as soon as the answer arrived, until one of them sees the batch ended. The pollers
are asyncio tasks over one aiohttp session in a process of their own (`python -m bench.reads`,
started and ready before the batch is created), so their CPU is not the SDK client's and
their start costs the batch nothing. Quiet and loaded runs alternate; medians are reported.

Items/s is the batch's items over the time from its create's answer to the poll that saw it
end (the SDK polling every 50 ms): what readers could slow down. `cpu ms/GET` is each
process's CPU in the loaded run beyond the quiet run before it, per GET.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any

import aiohttp
import orjson

from bench.harness import (
    ProcessMeter,
    SdkRun,
    bench_stack,
    median,
    print_table,
    sdk_batch,
    simulated_stack_env,
    stack_pids,
    write_chat_input,
)
from tests.support import TERMINAL, RunningStack

LATENCY_MS = 50.0
LIST_EVERY = 4  # every fourth request of a poller lists instead of getting the batch
MAX_LOAD_S = 600.0  # the pollers stop by then even if they never see the batch end
READY = "ready"


async def _poll(base_url: str, key: str, batch_id: str, pollers: int) -> dict[str, Any]:
    """Closed-loop reads until one poller sees the batch ended (or `MAX_LOAD_S`)."""
    latencies: list[float] = []
    failures = 0
    ended = asyncio.Event()
    headers = {"Authorization": f"Bearer {key}"}
    connector = aiohttp.TCPConnector(limit=pollers)
    async with aiohttp.ClientSession(headers=headers, connector=connector) as session:

        async def poller() -> None:
            nonlocal failures
            sent = 0
            while not ended.is_set():
                sent += 1
                listing = sent % LIST_EVERY == 0
                url = f"{base_url}/batches?limit=20" if listing else f"{base_url}/batches/{batch_id}"
                started = time.perf_counter()
                async with session.get(url) as response:
                    body = await response.read()
                latencies.append(time.perf_counter() - started)
                if response.status != 200:
                    failures += 1
                elif not listing and orjson.loads(body)["status"] in TERMINAL:
                    ended.set()

        started = time.perf_counter()
        tasks = [asyncio.create_task(poller()) for _ in range(pollers)]
        try:
            await asyncio.wait_for(ended.wait(), MAX_LOAD_S)
        except TimeoutError:
            ended.set()
        await asyncio.gather(*tasks)
        elapsed = time.perf_counter() - started
    latencies.sort()
    return {
        "gets": len(latencies),
        "seconds": elapsed,
        "failures": failures,
        "p50_ms": 1000 * latencies[len(latencies) // 2] if latencies else None,
        "p99_ms": 1000 * latencies[int(len(latencies) * 0.99)] if latencies else None,
    }


def _pollers_main() -> None:
    """`python -m bench.reads BASE_URL KEY POLLERS`: say ready, read the batch id from stdin,
    load the stack, print the figures as one JSON line."""
    base_url, key, pollers = sys.argv[1], sys.argv[2], int(sys.argv[3])
    print(READY, flush=True)
    batch_id = sys.stdin.readline().strip()
    print(orjson.dumps(asyncio.run(_poll(base_url, key, batch_id, pollers))).decode(), flush=True)


def _loaded_run(
    stack: RunningStack, input_path: Path, output_path: Path, pollers: int
) -> tuple[SdkRun, dict[str, Any]]:
    """The batch while the pollers read: they start (and are ready) first, get its id as soon
    as the create answered, and stop once they saw it end."""
    process = subprocess.Popen(
        [sys.executable, "-m", "bench.reads", stack.base_url, stack.key, str(pollers)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    stdin: IO[str] = process.stdin  # type: ignore[assignment]
    stdout: IO[str] = process.stdout  # type: ignore[assignment]
    try:
        if stdout.readline().strip() != READY:
            raise RuntimeError("the pollers did not start")

        def start(batch_id: str) -> None:
            stdin.write(batch_id + "\n")
            stdin.flush()

        run = sdk_batch(stack, input_path, output_path, poll_s=0.05, on_created=start)
        figures: dict[str, Any] = orjson.loads(stdout.readline())
        process.wait(60)
    finally:
        if process.poll() is None:
            process.kill()
    return run, figures


def _items_per_s(run: SdkRun) -> float:
    return run.items / run.run_s


def reads(args: argparse.Namespace) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        env = simulated_stack_env(workdir, LATENCY_MS, args.concurrency, args.executors)
        with bench_stack(workdir / "stack", **env) as stack:
            input_path = write_chat_input(workdir / "in.jsonl", args.read_n)
            output_path = workdir / "out.jsonl"
            pids = {name: pid for name, pid in stack_pids(stack).items() if name in ("core", "envoy")}
            for number in range(args.runs):
                measured: dict[str, tuple[SdkRun, dict[str, float], dict[str, Any]]] = {}
                for kind in ("quiet", "loaded") if number % 2 == 0 else ("loaded", "quiet"):
                    figures: dict[str, Any] = {}
                    with ProcessMeter(pids) as meter:
                        if kind == "quiet":
                            run = sdk_batch(stack, input_path, output_path, poll_s=0.05)
                        else:
                            run, figures = _loaded_run(stack, input_path, output_path, args.pollers)
                    measured[kind] = (run, meter.cpu_seconds(), figures)
                rows.append(_row(number + 1, measured))
    rows.append(_median_row(rows))
    print_table(
        f"Reads: {args.pollers} closed-loop pollers (get, every {LIST_EVERY}th a list of 20) through Envoy "
        f"while a {args.read_n}-item batch runs at {LATENCY_MS:g} ms",
        rows,
    )
    return rows


def _row(number: int, measured: dict[str, tuple[SdkRun, dict[str, float], dict[str, Any]]]) -> dict[str, Any]:
    quiet, quiet_cpu, _ = measured["quiet"]
    loaded, loaded_cpu, figures = measured["loaded"]
    gets = max(figures["gets"], 1)
    row: dict[str, Any] = {
        "run": number,
        "GETs/s": figures["gets"] / figures["seconds"],
        "p50 ms": figures["p50_ms"],
        "p99 ms": figures["p99_ms"],
        "failed GETs": figures["failures"],
        "quiet items/s": _items_per_s(quiet),
        "loaded items/s": _items_per_s(loaded),
        "loaded/quiet": _items_per_s(loaded) / _items_per_s(quiet),
    }
    for name in sorted(quiet_cpu):
        row[f"{name} cpu ms/GET"] = 1000 * (loaded_cpu[name] - quiet_cpu[name]) / gets
    return row


def _median_row(rows: list[dict[str, Any]]) -> dict[str, Any]:
    keys = [k for k in rows[0] if k != "run"]
    return {"run": "median", **{k: median([r[k] for r in rows if r[k] is not None]) for k in keys}}


if __name__ == "__main__":
    _pollers_main()
