"""A running batch's pace from samples of its own counters: exact while it is read often, the
average between the nearest reads otherwise, and the same work for any size of batch."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from batchgate.services.ingest.throughput import WINDOW_S, Paces, Sample, pace

STARTED = 1_000.0


def row(
    finished: int = 0, tokens: int = 0, total: int = 10_000, status: str = "in_progress", rejected: int = 0
) -> Any:
    return SimpleNamespace(
        id="batch_1",
        status=status,
        in_progress_at=STARTED,
        created_at=STARTED - 1,
        total=total,
        completed_count=finished,
        failed_count=rejected,
        rejected_count=rejected,
        input_tokens=tokens,
        output_tokens=0,
    )


def test_a_young_batch_s_pace_is_its_average_since_it_started() -> None:
    start = [Sample(STARTED, 0, 0)]
    assert pace(row(40, 4_000), start, STARTED + 10) == {
        "items_per_s": 4.0,
        "tokens_per_s": 400.0,
        "eta_s": 2490,
    }
    assert pace(row(0), start, STARTED + 10)["eta_s"] is None
    assert pace(row(5), start, STARTED + 0.1)["items_per_s"] == 5.0  # a window of one second at least


def test_an_older_batch_counts_only_the_last_minute_interpolating_at_its_start() -> None:
    samples = [Sample(STARTED, 0, 0), Sample(STARTED + 100, 1_000, 0)]  # 10/s for 100 s
    now = STARTED + 130  # then 2/s: 60 more items
    # the window starts at +70, where the first 100 s put the counter at 700
    assert pace(row(1_060), samples, now)["items_per_s"] == pytest.approx((1_060 - 700) / WINDOW_S)


def test_paces_follow_a_batch_read_every_second_and_forget_it_once_it_ends() -> None:
    clock = [STARTED]
    paces = Paces(clock=lambda: clock[0])
    finished = 0
    while clock[0] < STARTED + 200:
        clock[0] += 1
        finished += 10 if clock[0] < STARTED + 120 else 2
        found = paces.of([row(finished)])["batch_1"]
    assert found["items_per_s"] == pytest.approx(2.0)
    assert len(paces._samples["batch_1"]) <= WINDOW_S + 2  # a minute back, one a second
    assert paces.of([row(finished, status="completed")]) == {}
    assert paces._samples == {}


def test_a_read_that_finishes_after_a_newer_one_is_not_kept() -> None:
    clock = [STARTED + 10]
    paces = Paces(clock=lambda: clock[0])
    paces.of([row(100)])
    clock[0] += 2
    paces.of([row(90)])  # an older snapshot of the row, answered later
    assert [s.finished for s in paces._samples["batch_1"]] == [0, 100]


def test_records_refused_at_create_are_no_pace() -> None:
    """They count as failed from the start, but nothing ran: no rate, no time left."""
    paces = Paces(clock=lambda: STARTED + 2)
    assert paces.of([row(0, rejected=50, total=51)])["batch_1"] == {
        "items_per_s": 0.0,
        "tokens_per_s": 0.0,
        "eta_s": None,
    }
    assert pace(row(10, rejected=50, total=100), [Sample(STARTED, 0, 0)], STARTED + 10)["eta_s"] == 40
