"""Cron expressions of recurring batches: checking them and finding their next time.

Parsing and stepping are cronsim's (the library Healthchecks.io runs on; no dependencies).
Only 5-field expressions are accepted (minute hour day-of-month month day-of-week; names such
as `MON` and `JAN`, `L` for the last day of the month, and `*/n` steps work as in cronsim).
Times are read in an IANA zone, and DST transitions follow cronsim, which follows Debian
cron: a time that falls in the hour skipped in spring runs once, at the end of the gap; a
time in the hour repeated in autumn runs once, at its first occurrence. Expressions whose
minute or hour field is a wildcard (`*/15 * * * *`) simply follow real time.

The clock of template scheduling is injectable for tests: with `template_clock_file` set,
`schedule_clock` reads the current time from that file instead of the system clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from batchgate.services.common import errors

DEFAULT_TIMEZONE = "UTC"
CRON_FIELDS = 5
MAX_CRON_LENGTH = 200
MAX_TIMEZONE_LENGTH = 64
HOST_ZONE_FILES = frozenset({"localtime", "posixrules", "Factory"})
"""Files of the zone database that name no zone (`localtime` is whatever the host says: two
replicas could schedule one template at different times)."""


def check_expression(expression: str, param: str = "cron") -> str:
    """The expression, normalized to single spaces; 400 `invalid_cron` naming the problem."""
    fields = expression.split()
    if len(expression) > MAX_CRON_LENGTH:
        raise errors.invalid(f"'cron' is longer than {MAX_CRON_LENGTH} characters.", "invalid_cron", param)
    if len(fields) != CRON_FIELDS:
        raise errors.invalid(
            f"'cron' must have {CRON_FIELDS} fields (minute hour day-of-month month day-of-week); "
            f"{expression[:80]!r} has {len(fields)}.",
            "invalid_cron",
            param,
        )
    normalized = " ".join(fields)
    try:
        next(CronSim(normalized, datetime.now(UTC)))
    except CronSimError as exc:
        raise errors.invalid(
            f"'cron' {normalized!r} is not a valid expression: {exc}.", "invalid_cron", param
        ) from None
    except StopIteration:
        raise errors.invalid(f"'cron' {normalized!r} never matches a date.", "invalid_cron", param) from None
    return normalized


def check_timezone(name: str, param: str = "cron_timezone") -> str:
    """An IANA zone name (default UTC); 400 `invalid_cron_timezone` for an unknown one."""
    if not name:
        return DEFAULT_TIMEZONE
    try:
        if len(name) > MAX_TIMEZONE_LENGTH or name.startswith(("/", ".")) or name in HOST_ZONE_FILES:
            raise ValueError(name)
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise errors.invalid(
            f"'cron_timezone' {name[:80]!r} is not a known IANA time zone (e.g. 'Europe/Paris').",
            "invalid_cron_timezone",
            param,
        ) from None
    return name


def next_time(expression: str, timezone: str, after: float) -> float:
    """Unix seconds of the expression's first time strictly after `after`. cronsim steps in
    local wall time and answers a time in the repeated autumn hour at its first occurrence,
    even when `after` is in the second one: that time is past, and taken as next it made a
    run every second until the hour ended. Such a time is skipped (it ran, or was missed)."""
    start = datetime.fromtimestamp(after, ZoneInfo(timezone))
    for moment in CronSim(expression, start):
        if moment.timestamp() > after:
            return moment.timestamp()
    raise ValueError(f"{expression!r} has no time after {after}")  # checked at create: never


def schedule_clock(clock_file: str) -> Callable[[], float]:
    """The current time for template scheduling: the system clock, or (tests) the unix
    seconds written in `clock_file`."""
    if not clock_file:
        return time.time
    path = Path(clock_file)

    def read() -> float:
        return float(path.read_text().strip())

    return read
