"""Cron expressions of recurring batches: what is refused, and DST in a zone that has it."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from batchgate.services.common import cron, errors

PARIS = "Europe/Paris"  # CET/CEST: 2026-03-29 02:00 → 03:00, 2026-10-25 03:00 → 02:00


def _utc(*parts: int) -> float:
    return datetime(*parts, tzinfo=UTC).timestamp()


def _runs(expression: str, zone: str, start: float, count: int) -> list[datetime]:
    times, at = [], start
    for _ in range(count):
        at = cron.next_time(expression, zone, at)
        times.append(datetime.fromtimestamp(at, UTC).replace(tzinfo=None))
    return times


@pytest.mark.parametrize(
    ("expression", "says"),
    [
        ("* * *", "has 3"),
        ("0 0 * * * *", "has 6"),  # cronsim would take seconds; the API takes 5 fields
        ("@daily", "has 1"),
        ("", "has 0"),
        ("61 * * * *", "Bad minute"),
        ("0 25 * * *", "Bad hour"),
        ("0 0 30 2 *", "Bad day-of-month"),  # no February has a 30th
        ("0 0 31 4,6 *", "Bad day-of-month"),
        ("0 0 * * FUNDAY", "Bad day-of-week"),
        (",".join(map(str, range(60))) + " " + ",".join(map(str, range(24))) + " * * *", "longer than 200"),
    ],
)
def test_a_bad_expression_is_400_naming_the_problem(expression: str, says: str) -> None:
    with pytest.raises(errors.ApiError) as caught:
        cron.check_expression(expression)
    assert caught.value.status == 400 and caught.value.code == "invalid_cron"
    assert caught.value.param == "cron" and says in caught.value.message


def test_a_good_expression_is_normalized() -> None:
    assert cron.check_expression("  0   2 * * MON-FRI ") == "0 2 * * MON-FRI"


@pytest.mark.parametrize(
    "zone", ["Mars/Olympus", "utc+2", "../../etc/passwd", "Europe/" + "x" * 80, "localtime", "Factory"]
)
def test_an_unknown_zone_is_400(zone: str) -> None:
    with pytest.raises(errors.ApiError) as caught:
        cron.check_timezone(zone)
    assert caught.value.code == "invalid_cron_timezone" and caught.value.param == "cron_timezone"


def test_the_zone_defaults_to_utc() -> None:
    assert cron.check_timezone("") == "UTC"
    assert cron.check_timezone(PARIS) == PARIS


def test_a_daily_time_in_the_spring_gap_runs_once_at_the_end_of_the_gap() -> None:
    # 02:30 does not exist in Paris on 2026-03-29: that day's run is at 03:00 CEST (01:00 UTC).
    runs = _runs("30 2 * * *", PARIS, _utc(2026, 3, 28, 12), 3)
    assert runs == [datetime(2026, 3, 29, 1, 0), datetime(2026, 3, 30, 0, 30), datetime(2026, 3, 31, 0, 30)]


def test_a_daily_time_in_the_repeated_autumn_hour_runs_once() -> None:
    # 02:30 happens twice in Paris on 2026-10-25: one run, at the first (CEST, 00:30 UTC).
    runs = _runs("30 2 * * *", PARIS, _utc(2026, 10, 24, 12), 3)
    assert runs == [
        datetime(2026, 10, 25, 0, 30),
        datetime(2026, 10, 26, 1, 30),
        datetime(2026, 10, 27, 1, 30),
    ]


@pytest.mark.parametrize("minutes", [5, 29, 31, 59])
def test_from_inside_the_second_repeated_hour_the_next_time_is_the_next_day(minutes: int) -> None:
    """Created, resumed or caught up at 02:mm CET on 2026-10-25 (01:mm UTC), after 02:30 CEST
    (00:30 UTC) passed: that time was answered again and again, a run every second."""
    after = _utc(2026, 10, 25, 1, minutes)
    assert cron.next_time("30 2 * * *", PARIS, after) == _utc(2026, 10, 26, 1, 30)


def test_an_hourly_expression_follows_real_time_across_the_autumn_change() -> None:
    # Every hour of real time, the repeated 02:00 (local) included: 00:00 and 01:00 UTC.
    runs = _runs("0 * * * *", PARIS, _utc(2026, 10, 24, 23, 30), 4)
    assert runs == [datetime(2026, 10, 25, h) for h in range(4)]


def test_utc_has_no_gap() -> None:
    assert _runs("30 2 * * *", "UTC", _utc(2026, 3, 28, 12), 1) == [datetime(2026, 3, 29, 2, 30)]


def test_next_time_is_strictly_after() -> None:
    at = _utc(2026, 1, 1, 2, 0)
    assert cron.next_time("0 2 * * *", "UTC", at) == _utc(2026, 1, 2, 2, 0)


def test_the_schedule_clock_reads_its_file(tmp_path: Path) -> None:
    clock_file = tmp_path / "now"
    clock_file.write_text("1767225600\n")
    clock = cron.schedule_clock(str(clock_file))
    assert clock() == 1767225600.0
    clock_file.write_text("1767312000")
    assert clock() == 1767312000.0
