"""Keep the benchmarks runnable: a tiny run of some scenarios must finish and save its record.

Figures from this run mean nothing (tiny sizes, shared machine); nothing is asserted about them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _bench(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`python -m module args…` from the repository's root, which must succeed."""
    done = subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-5000:]
    return done


def test_scenarios_run_and_save_records() -> None:
    results = ROOT / "bench" / "results"
    before = set(results.glob("*.json")) if results.exists() else set()
    for scenario in (
        ["throughput", "--n", "30", "--latencies", "0", "--runs", "1", "--databases", "sqlite"],
        ["ingest", "--sizes", "50", "--line-bytes", "100", "--inline-lines", "50"],
        ["capacity", "--capped-n", "40"],
        ["expedite", "--n", "200"],
        ["tools", "--n", "20", "--runs", "1"],
        ["reads", "--read-n", "100", "--pollers", "8", "--runs", "1"],
        ["scale", "--scale-n", "300", "--databases", "sqlite"],
        [
            "soak",
            "--databases",
            "sqlite",
            "--soak-minutes",
            "0.15",
            "--soak-warmup-minutes",
            "0",
            "--soak-every-s",
            "1",
            "--soak-items",
            "10",
        ],
    ):
        _bench("bench", *scenario)
    new = sorted(set(results.glob("*.json")) - before)
    assert {json.loads(p.read_text())["scenario"] for p in new} >= {
        "throughput",
        "ingest",
        "capacity",
        "expedite",
        "tools",
        "reads",
        "scale",
        "soak",
    }
    for path in new:
        record = json.loads(path.read_text())
        assert record["figures"] and record["machine"]["cpus"]
        path.unlink()


def test_the_grpc_call_micro_benchmark_runs() -> None:
    done = _bench("bench.grpc_calls", "--calls", "50", "--in-flight", "4", "--runs", "1")
    assert "medians of 1 runs" in done.stdout and "guarded" in done.stdout
