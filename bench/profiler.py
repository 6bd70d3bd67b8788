"""Sampling profiles of the stack's processes with py-spy, summarised as top self-time frames.

py-spy attaches to running processes (no code change, no restart): `record --format raw`
writes collapsed stacks; the summary counts, per process, the share of samples whose innermost
frame is each function ("self time") and whose stack passes through each of our modules.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

RATE_HZ = 200
OUR_PACKAGES = ("services/", "batchgate/", "gateway/")


def py_spy() -> str:
    found = shutil.which("py-spy", path=str(Path(sys.executable).parent))
    if not found:
        raise SystemExit("py-spy is not installed (it is in the dev extras: make .venv/.installed)")
    return found


@contextlib.contextmanager
def profiling(pids: dict[str, int], outdir: Path) -> Iterator[dict[str, Path]]:
    """Record every process in `pids` while the block runs; yields name → raw profile path."""
    outdir.mkdir(parents=True, exist_ok=True)
    paths = {name: outdir / f"{name}.txt" for name in pids}
    recorders = [
        subprocess.Popen(
            [
                py_spy(),
                "record",
                "--pid",
                str(pid),
                "--rate",
                str(RATE_HZ),
                "--format",
                "raw",
                "--nonblocking",
                "--output",
                str(paths[name]),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for name, pid in pids.items()
    ]
    try:
        yield paths
    finally:
        for recorder in recorders:
            recorder.send_signal(signal.SIGINT)
        for recorder in recorders:
            try:
                recorder.wait(30)
            except subprocess.TimeoutExpired:
                recorder.kill()


def _frame_name(frame: str) -> str:
    """`function (path/to/file.py:123)` → `function (file.py)`; shortened site-packages paths."""
    name, _, where = frame.partition(" (")
    path = where.split(":")[0]
    if "site-packages/" in path:
        path = path.split("site-packages/", 1)[1]
    for package in OUR_PACKAGES:
        if package in path:
            path = package + path.split(package, 1)[1]
    return f"{name} ({path})"


def summarise(raw: Path, top: int = 10) -> dict[str, Any]:
    """Top self-time frames and the share of time spent under each of our modules."""
    self_time: Counter[str] = Counter()
    in_module: Counter[str] = Counter()
    total = 0
    if not raw.exists():
        return {"samples": 0, "self": [], "modules": []}
    for line in raw.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [f for f in stack.split(";") if f]
        if not frames:
            continue
        total += count
        self_time[_frame_name(frames[-1])] += count
        modules = {_frame_name(f).split(" (", 1)[1].rstrip(")") for f in frames}
        for module in modules:
            if module.startswith(OUR_PACKAGES):
                in_module[module] += count
    share = lambda c: round(100.0 * c / total, 1) if total else 0.0  # noqa: E731
    return {
        "samples": total,
        "self": [(name, share(c)) for name, c in self_time.most_common(top)],
        "modules": [(name, share(c)) for name, c in in_module.most_common(top)],
    }
