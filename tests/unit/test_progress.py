"""The batch progress display: a live bar on a terminal, a readable history in a log."""

from __future__ import annotations

import io

from batchgate.progress import ProgressDisplay, RateMeter, format_duration


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _batch(status: str, completed: int, failed: int = 0, total: int = 100) -> dict:
    return {"status": status, "request_counts": {"total": total, "completed": completed, "failed": failed}}


def test_a_log_gets_plain_lines_at_status_changes_and_each_tenth() -> None:
    out, clock = io.StringIO(), _Clock()
    display = ProgressDisplay(out, "batch_x", tty=False, clock=clock)
    for done in range(0, 100, 2):  # every 2% of the way, one second apart
        display.update(_batch("in_progress", done))
        clock.now += 1
    display.finish(_batch("completed", 98, failed=2))

    text = out.getvalue()
    assert "\r" not in text and "\x1b" not in text
    lines = text.splitlines()
    # The first observation, then one line per tenth crossed, then the final state.
    assert len(lines) == 1 + 9 + 1, lines
    assert lines[0].endswith("batch_x in_progress: 0/100 (0%)  0 completed  0 failed  --/s  ETA --")
    assert "in_progress: 10/100 (10%)  10 completed  0 failed  2.0/s  ETA 45s" in lines[1]
    assert lines[-1].endswith("batch_x completed: 100/100 (100%)  98 completed  2 failed  2.0/s  ETA 0s")


def test_a_log_gets_a_heartbeat_when_nothing_moves() -> None:
    out, clock = io.StringIO(), _Clock()
    display = ProgressDisplay(out, "batch_x", tty=False, clock=clock)
    for _ in range(130):
        display.update(_batch("in_progress", 5))
        clock.now += 1
    assert len(out.getvalue().splitlines()) == 3  # at 0 s, 60 s and 120 s


def test_a_terminal_gets_one_line_redrawn_with_a_bar(monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    out, clock = io.StringIO(), _Clock()
    display = ProgressDisplay(out, "batch_x", tty=True, clock=clock)
    display.update(_batch("in_progress", 0))
    clock.now += 10
    display.update(_batch("in_progress", 50))
    display.finish(_batch("completed", 100))

    text = out.getvalue()
    assert text.count("\r") == 3 and text.endswith("\n") and text.count("\n") == 1
    frames = [frame.removesuffix("\x1b[K\n").removesuffix("\x1b[K") for frame in text.split("\r")[1:]]
    assert "[------------------------] 0/100" in frames[0]
    assert "[############------------] 50/100 (50%)" in frames[1] and "5.0/s  ETA 10s" in frames[1]
    assert "completed   [########################] 100/100 (100%)" in frames[2]


def test_a_narrow_terminal_gets_a_line_that_fits(monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "60")
    out = io.StringIO()
    ProgressDisplay(out, "batch_x", tty=True).update(_batch("in_progress", 50))
    line = out.getvalue().removeprefix("\r").removesuffix("\x1b[K")
    assert len(line) == 59 and line.startswith("batch_x in_progress [")


def test_rate_uses_a_sliding_window() -> None:
    meter = RateMeter(window_s=30)
    assert meter.rate() is None
    meter.observe(0, 0)
    meter.observe(10, 100)  # 10/s at first
    assert meter.rate() == 10.0
    for t in range(11, 100):  # then it stalls: the early burst leaves the window
        meter.observe(t, 100)
    assert meter.rate() is None


def test_durations_read_naturally() -> None:
    assert [format_duration(s) for s in (0, 59.4, 61, 3599, 3600, 7322)] == [
        "0s",
        "59s",
        "1m01s",
        "59m59s",
        "1h00m",
        "2h02m",
    ]


def test_the_batch_s_own_throughput_wins_over_the_local_measure() -> None:
    out, clock = io.StringIO(), _Clock()
    display = ProgressDisplay(out, "batch_x", tty=False, clock=clock)
    display.update(_batch("in_progress", 0))
    clock.now += 10
    paced = {
        **_batch("in_progress", 20),
        "throughput": {"items_per_s": 4.0, "tokens_per_s": 300.0, "eta_s": 20},
    }
    display.update(paced)  # locally 2.0/s; the server saw 4.0/s over its last minute
    assert "20/100 (20%)  20 completed  0 failed  4.0/s  ETA 20s" in out.getvalue().splitlines()[-1]
