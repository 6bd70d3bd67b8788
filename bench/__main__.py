"""`python -m bench <scenario> [flags]`: see bench/README.md."""

from __future__ import annotations

import argparse
import os

from bench.scenarios import SCENARIOS, run

CI_DATABASE = "postgresql+asyncpg://postgres@127.0.0.1:5432/test"


def _floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x]


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("scenario", choices=[*SCENARIOS, "all"])
    parser.add_argument("--n", type=int, default=20_000, help="items per batch")
    parser.add_argument(
        "--latencies", type=_floats, default=[0.0, 50.0], help="simulated upstream latency, ms"
    )
    parser.add_argument(
        "--latency-ms", type=float, default=0.0, help="latency for scenarios with one latency"
    )
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument(
        "--baselines",
        type=lambda t: [b for b in t.split(",") if b],
        default=["aiohttp", "httpx+aiohttp"],
        help="throughput: direct clients to compare with (aiohttp, the baseline; httpx, httpx+aiohttp)",
    )
    parser.add_argument(
        "--headroom-concurrency",
        type=int,
        default=256,
        help="headroom: items in flight (batchgate's default executor concurrency)",
    )
    parser.add_argument("--capped-n", type=int, default=2_000, help="capacity, kill: items of the batch")
    parser.add_argument("--read-n", type=int, default=3_000, help="reads: items of the batch")
    parser.add_argument("--pollers", type=int, default=64, help="reads: closed-loop readers")
    parser.add_argument("--scale-n", type=int, default=1_000_000, help="scale: items of the one batch")
    parser.add_argument("--soak-minutes", type=float, default=30.0, help="soak: how long the load runs")
    parser.add_argument(
        "--soak-warmup-minutes", type=float, default=2.0, help="soak: RSS after this is the reference"
    )
    parser.add_argument("--soak-every-s", type=float, default=2.0, help="soak: seconds between creates")
    parser.add_argument("--soak-items", type=int, default=200, help="soak: items per batch")
    parser.add_argument("--executors", type=int, default=1)
    parser.add_argument("--executor-counts", type=_ints, default=[1, 2])
    parser.add_argument("--databases", type=lambda t: t.split(","), default=["sqlite", "postgres"])
    parser.add_argument("--runs", type=int, default=3, help="alternating runs; the median is reported")
    parser.add_argument(
        "--sizes", type=_ints, default=[1_000, 10_000, 50_000], help="ingest: lines per input"
    )
    parser.add_argument(
        "--line-bytes",
        type=int,
        default=3_800,
        help="ingest: padding per line (50,000 lines stay under 200 MB)",
    )
    parser.add_argument(
        "--inline-lines",
        type=int,
        default=5_000,
        help="ingest: records of the inline-requests create (0: none; stay under max_inline_bytes)",
    )
    parser.add_argument("--profile", action="store_true", help="headroom: py-spy the last run's processes")
    args = parser.parse_args()
    os.environ.setdefault("BATCHGATE_TEST_DATABASE_URL", CI_DATABASE)
    for name in SCENARIOS if args.scenario == "all" else [args.scenario]:
        run(name, args)


if __name__ == "__main__":
    main()
