"""Progress of a running batch, for a terminal or a log: done/total, completed, failed, rate, ETA.

On a terminal one line is redrawn in place with a bar. Anywhere else (a CI log, a file, a pipe)
plain lines are printed instead, without carriage returns or escape codes: when the status
changes, at every tenth of the way, at least every `HEARTBEAT_S` while nothing moves, and once
at the end, so the log reads as a short history.
"""

from __future__ import annotations

import shutil
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TextIO

RATE_WINDOW_S = 30.0
HEARTBEAT_S = 60.0
PLAIN_STEPS = 10
BAR_WIDTH = 24


@dataclass(frozen=True)
class Counts:
    status: str
    total: int
    completed: int
    failed: int

    @property
    def done(self) -> int:
        return self.completed + self.failed

    @classmethod
    def of(cls, batch: dict[str, Any]) -> Counts:
        counts = batch.get("request_counts") or {}
        return cls(
            str(batch.get("status", "")),
            int(counts.get("total", 0)),
            int(counts.get("completed", 0)),
            int(counts.get("failed", 0)),
        )


class RateMeter:
    """Items finished per second over the last `window_s` seconds of observations."""

    def __init__(self, window_s: float = RATE_WINDOW_S) -> None:
        self._window_s = window_s
        self._samples: deque[tuple[float, int]] = deque()

    def observe(self, now: float, done: int) -> None:
        self._samples.append((now, done))
        while len(self._samples) > 2 and now - self._samples[1][0] >= self._window_s:
            self._samples.popleft()

    def rate(self) -> float | None:
        if len(self._samples) < 2:
            return None
        (t0, d0), (t1, d1) = self._samples[0], self._samples[-1]
        if t1 <= t0 or d1 <= d0:
            return None
        return (d1 - d0) / (t1 - t0)


def format_duration(seconds: float) -> str:
    seconds = round(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"


class ProgressDisplay:
    """Shows one batch's progress on `stream` (a TTY gets the live bar)."""

    def __init__(
        self,
        stream: TextIO,
        batch_id: str,
        tty: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._stream = stream
        self._batch_id = batch_id
        self._tty = stream.isatty() if tty is None else tty
        self._clock = clock
        self._meter = RateMeter()
        self._last_plain: tuple[float, Counts] | None = None
        self._drawn = False

    def _figures(self, counts: Counts, pace: dict[str, Any] | None = None) -> str:
        """The figures of the line; `pace`: the batch's own `throughput` (the server's last
        minute), preferred to what this display measured between its polls."""
        pct = f"{100 * counts.done // counts.total}%" if counts.total else "--%"
        rate = pace["items_per_s"] if pace and pace.get("items_per_s") else self._meter.rate()
        remaining = max(counts.total - counts.done, 0)
        if rate is None:
            speed, eta = "--/s", "ETA --"
        else:
            speed = f"{rate:.1f}/s"
            eta = f"ETA {format_duration(remaining / rate)}" if remaining else "ETA 0s"
        return (
            f"{counts.done}/{counts.total} ({pct})  {counts.completed} completed  {counts.failed} failed  "
            f"{speed}  {eta}"
        )

    def _bar(self, counts: Counts) -> str:
        filled = BAR_WIDTH * counts.done // counts.total if counts.total else 0
        return "[" + "#" * filled + "-" * (BAR_WIDTH - filled) + "]"

    def _plain_due(self, now: float, counts: Counts) -> bool:
        if self._last_plain is None:
            return True
        then, before = self._last_plain
        if counts.status != before.status or now - then >= HEARTBEAT_S:
            return True
        if not counts.total:
            return False
        step = max(counts.total // PLAIN_STEPS, 1)
        return counts.done // step > before.done // step

    def update(self, batch: dict[str, Any]) -> None:
        counts = Counts.of(batch)
        now = self._clock()
        self._meter.observe(now, counts.done)
        if self._tty:
            figures = self._figures(counts, batch.get("throughput"))
            line = f"{self._batch_id} {counts.status:<11} {self._bar(counts)} {figures}"
            width = shutil.get_terminal_size().columns
            self._stream.write("\r" + line[: max(width - 1, 20)] + "\x1b[K")
            self._drawn = True
        elif self._plain_due(now, counts):
            stamp = time.strftime("%H:%M:%S")
            figures = self._figures(counts, batch.get("throughput"))
            self._stream.write(f"{stamp} {self._batch_id} {counts.status}: {figures}\n")
            self._last_plain = (now, counts)
        self._stream.flush()

    def finish(self, batch: dict[str, Any]) -> None:
        """The final state, always shown, ending the live line."""
        self._last_plain = None
        self.update(batch)
        if self._tty and self._drawn:
            self._stream.write("\n")
            self._stream.flush()
