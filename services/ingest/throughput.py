"""A running batch's pace over the last minute: the batch object's `throughput` extension.

`items_per_s` and `tokens_per_s` are how fast the batch's own counters grew (items finished:
`completed_count + failed_count` less `rejected_count`, the records refused at create, which
count as failed from the start but never ran; tokens: `input_tokens + output_tokens`, the
columns results adds each recorded outcome to) over the last `WINDOW_S` seconds, or since the batch started
when that is sooner; `eta_s` is the items still open at that pace (null while nothing
finishes). Only a batch in progress has one; any other batch's `throughput` is null.

Reading a pace costs the same for a batch of ten items as for one of a million: it comes from
the batch row the read fetched anyway, never from the batch's items (counting the items that
finished in the window was a pass over all of them, on every read of a running batch). Each
ingest process keeps, per running batch it was asked about, samples of those counters as it
read them (one per `SAMPLE_S` at most, reaching just past `WINDOW_S` back), and the batch's
start is a sample of its own: nothing had finished at `in_progress_at`. The counters at the
window's start are interpolated between the samples either side of it, which is exact while
the batch is read at least every `SAMPLE_S`, and the average pace between the two nearest
reads otherwise.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from batchgate.services.common.db import AnyRow
from batchgate.services.common.states import BatchStatus

WINDOW_S = 60.0
MIN_WINDOW_S = 1.0  # a batch that started a moment ago is not credited with an infinite rate
SAMPLE_S = 1.0  # at most one kept sample per second of each batch: ~61 per running batch
MAX_BATCHES = 10_000  # running batches remembered; past that the samples start over


class Sample(NamedTuple):
    """A batch's counters as read at `at`."""

    at: float
    finished: int
    tokens: int


def _counters(row: AnyRow, now: float) -> Sample:
    finished = row.completed_count + row.failed_count - row.rejected_count
    return Sample(now, finished, row.input_tokens + row.output_tokens)


def _at(before: Sample, after: Sample, at: float) -> tuple[float, float]:
    """(finished, tokens) interpolated at `at` between two samples."""
    span = after.at - before.at
    share = (at - before.at) / span if span > 0 else 1.0
    return (
        before.finished + share * (after.finished - before.finished),
        before.tokens + share * (after.tokens - before.tokens),
    )


def pace(row: AnyRow, samples: Sequence[Sample], now: float) -> dict[str, Any]:
    """The `throughput` object of the running batch `row` as read at `now`, from earlier
    `samples` of its counters (oldest first; the first at or before the window's start)."""
    started = row.in_progress_at or row.created_at
    current = _counters(row, now)
    window_start = max(now - WINDOW_S, started)
    points = [*samples, current]
    later = next(i for i, point in enumerate(points) if point.at > window_start or point is current)
    base = _at(points[max(later - 1, 0)], points[later], window_start)
    window = max(now - window_start, MIN_WINDOW_S)
    items_per_s = max(current.finished - base[0], 0.0) / window
    remaining = max(row.total - row.completed_count - row.failed_count, 0)
    return {
        "items_per_s": round(items_per_s, 3),
        "tokens_per_s": round(max(current.tokens - base[1], 0.0) / window, 1),
        "eta_s": round(remaining / items_per_s) if items_per_s > 0 else None,
    }


class Paces:
    """The samples of the running batches this process was asked about, and their paces."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._samples: dict[str, deque[Sample]] = {}

    def of(self, rows: Sequence[AnyRow]) -> dict[str, dict[str, Any]]:
        """The `throughput` of each batch of `rows` that is in progress, by id; remembers their
        counters and forgets the batches that no longer run."""
        now = self._clock()
        found = {}
        for row in rows:
            if row.status == BatchStatus.IN_PROGRESS:
                samples = self._remembered(row)
                found[row.id] = pace(row, samples, now)
                self._keep(samples, _counters(row, now))
            else:
                self._samples.pop(row.id, None)
        return found

    def _remembered(self, row: AnyRow) -> deque[Sample]:
        samples = self._samples.get(row.id)
        if samples is None:
            if len(self._samples) >= MAX_BATCHES:
                self._samples.clear()
            samples = self._samples[row.id] = deque([Sample(row.in_progress_at or row.created_at, 0, 0)])
        return samples

    @staticmethod
    def _keep(samples: deque[Sample], current: Sample) -> None:
        """Add `current` (unless a sample is younger than `SAMPLE_S`, or it is older than the
        newest: concurrent reads can finish out of order), then drop the samples before the
        last one at or before the window's start."""
        newest = samples[-1]
        if current.at - newest.at >= SAMPLE_S and current.finished >= newest.finished:
            samples.append(current)
        window_start = current.at - WINDOW_S
        while len(samples) > 1 and samples[1].at <= window_start:
            samples.popleft()
