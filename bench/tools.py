"""The `tools` scenario (issue 15): records/s of a batch whose records each run 3 tool rounds
(4 model turns) against the same records without tools, end to end with the openai SDK
(upload, create, poll, download), on one stack with the simulated upstream at `--latency-ms`.
The tool servers are the test suite's real ones on loopback (`tests/tool_servers.py`): HTTP,
and MCP (stateful, SSE answers), on threads of this process: `tool servers cpu s/1k` is this
process's CPU per 1,000 records (the tool servers, and the SDK client polling), next to the
executor's. Runs alternate; medians are reported."""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path
from typing import Any

import orjson

from bench.harness import ProcessMeter, bench_stack, median, print_table, sdk_batch, stack_pids
from tests.tool_servers import HttpToolServer, McpToolServer

ROUNDS = 3
TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]


def _write(path: Path, n: int, config: dict[str, Any] | None) -> Path:
    with path.open("wb") as out:
        for i in range(n):
            body: dict[str, Any] = {
                "model": "gpt-4o-mini",
                "messages": [{"role": "user", "content": f"benchmark request {i}"}],
            }
            if config is not None:
                body.update(tools=TOOLS, x_sim={"tool_rounds": ROUNDS}, batchgate={"tool_config": config})
            line = {"custom_id": f"req-{i}", "method": "POST", "url": "/v1/chat/completions", "body": body}
            out.write(orjson.dumps(line) + b"\n")
    return path


def tools(args: argparse.Namespace) -> list[dict[str, Any]]:
    env = {
        "BATCHGATE_SIMULATOR_LATENCY_MS": str(args.latency_ms),
        "BATCHGATE_EXECUTOR_CONCURRENCY": str(args.concurrency),
        "BATCHGATE_TOOL_ALLOWED_NETWORKS": "127.0.0.0/8",
        "BATCHGATE_LOG_LEVEL": "WARNING",
    }
    with (
        tempfile.TemporaryDirectory() as tmp,
        HttpToolServer() as http,
        McpToolServer() as mcp,
        bench_stack(Path(tmp) / "stack", **env) as stack,
    ):
        workdir = Path(tmp)
        inputs = {
            "no tools": (_write(workdir / "plain.jsonl", args.n, None), 1),
            "HTTP tools": (_write(workdir / "http.jsonl", args.n, {"url": http.url}), ROUNDS + 1),
            "MCP tools": (_write(workdir / "mcp.jsonl", args.n, {"type": "mcp", "url": mcp.url}), ROUNDS + 1),
        }
        rates: dict[str, list[float]] = {name: [] for name in inputs}
        cpu: dict[str, dict[str, list[float]]] = {name: {"executor": [], "tools": []} for name in inputs}
        failed: dict[str, int] = dict.fromkeys(inputs, 0)
        pids = {"executor": stack_pids(stack)["executor-0"], "tools": os.getpid()}
        for run in range(args.runs):
            for name in inputs if run % 2 == 0 else reversed(list(inputs)):
                with ProcessMeter(pids) as meter:
                    result = sdk_batch(stack, inputs[name][0], workdir / "out.jsonl")
                rates[name].append(result.items_per_s)
                for process, seconds in meter.cpu_seconds().items():
                    cpu[name][process].append(seconds * 1000 / args.n)
                failed[name] += result.failed
    rows = [
        {
            "records": name,
            "items": args.n,
            "tool rounds": 0 if turns == 1 else ROUNDS,
            "model calls/record": turns,
            "records/s": median(rates[name]),
            "model calls/s": median(rates[name]) * turns,
            "vs no tools": median(rates[name]) / median(rates["no tools"]),
            "executor cpu s/1k": median(cpu[name]["executor"]),
            "tool servers cpu s/1k": median(cpu[name]["tools"]),
            "failed": failed[name],
        }
        for name, (_path, turns) in inputs.items()
    ]
    upstream = f"{args.latency_ms:g} ms upstream, median of {args.runs}"
    title = f"Tools: {ROUNDS}-round tool batches vs no tools ({upstream})"
    print_table(title, rows)
    return rows
