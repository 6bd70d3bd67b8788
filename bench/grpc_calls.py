"""What our wrapping of every gRPC handler costs a server per call: health checks against a
bare `grpc.aio` server and against one whose handlers run inside their `_Guard`
(`grpc_server.GuardingRegistry`: caller check, API key, query string, span, error envelope).

Each server runs in a process of its own, with the event loop the services use; a client in
this process makes `--calls` checks, `--in-flight` at once, and the server's CPU time over
them is divided by the calls. Runs alternate (bare, guarded, guarded, bare, …) and medians are
printed. Plaintext, and no caller identity is checked (that needs the cluster's
certificates): the guard's remaining work is what every internal and public call pays.

    .venv/bin/python -m bench.grpc_calls [--calls 20000] [--in-flight 64] [--runs 6]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time

import grpc
import uvloop
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1.health import aio as health_aio

from batchgate.services.common.grpc_server import GuardingRegistry
from tests.support import free_port

MODES = ("bare", "guarded")


async def serve(mode: str, port: int) -> None:
    """Serve health until stdin closes, printing the process's CPU seconds at each line read."""
    server = grpc.aio.server()
    health = health_aio.HealthServicer()
    target = GuardingRegistry(server, "ingest", None, False) if mode == "guarded" else server
    health_pb2_grpc.add_HealthServicer_to_server(health, target)
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    print("ready", flush=True)
    loop = asyncio.get_running_loop()
    while await loop.run_in_executor(None, sys.stdin.readline):
        times = os.times()
        print(times.user + times.system, flush=True)
    await server.stop(None)


async def calls(port: int, n: int, in_flight: int) -> float:
    """Seconds for `n` health checks, `in_flight` at once (after a warm-up)."""
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        check = health_pb2_grpc.HealthStub(channel).Check
        request = health_pb2.HealthCheckRequest()
        gate = asyncio.Semaphore(in_flight)

        async def one() -> None:
            async with gate:
                await check(request)

        await asyncio.gather(*(one() for _ in range(in_flight * 8)))
        started = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(n)))
        return time.perf_counter() - started


def one_run(mode: str, n: int, in_flight: int) -> tuple[float, float]:
    """(calls per second, the server's CPU µs per call) of one server in `mode`."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "bench.grpc_calls", "--serve", mode, "--port", str(port)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdin is not None and server.stdout is not None
    try:
        if server.stdout.readline().strip() != "ready":
            raise SystemExit(f"the {mode} server did not start")

        def cpu() -> float:
            server.stdin.write("\n")  # type: ignore[union-attr]
            server.stdin.flush()  # type: ignore[union-attr]
            return float(server.stdout.readline())  # type: ignore[union-attr]

        before = cpu()
        seconds = uvloop.run(calls(port, n, in_flight))
        return n / seconds, (cpu() - before) / n * 1e6
    finally:
        server.stdin.close()
        server.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--in-flight", type=int, default=64)
    parser.add_argument("--runs", type=int, default=6)
    parser.add_argument("--serve", choices=MODES, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        uvloop.run(serve(args.serve, args.port))
        return
    figures: dict[str, list[tuple[float, float]]] = {mode: [] for mode in MODES}
    for run in range(args.runs):
        for mode in MODES if run % 2 == 0 else reversed(MODES):
            figures[mode].append(one_run(mode, args.calls, args.in_flight))
            rate, cpu_us = figures[mode][-1]
            print(f"  {mode:8} {rate:8,.0f} calls/s  {cpu_us:6.1f} µs server CPU per call", flush=True)
    print(f"medians of {args.runs} runs, {args.calls:,} calls each, {args.in_flight} in flight:")
    for mode, runs in figures.items():
        rate = statistics.median(r for r, _ in runs)
        cpu_us = statistics.median(c for _, c in runs)
        print(f"  {mode:8} {rate:8,.0f} calls/s  {cpu_us:6.1f} µs server CPU per call")


if __name__ == "__main__":
    main()
