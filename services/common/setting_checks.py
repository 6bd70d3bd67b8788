"""What each setting may be, in one place: `RANGES` bounds every numeric setting,
`TEXT_CHECKS` reads the text settings that have a format, both keyed by the field name of
`batchgate.services.common.config.Settings`, and `CONFLICTS` holds the settings whose values
are only wrong together (a port range past 65535, a longest wait below the first).

`batchgate.services.common.loading.load_settings` applies them once, so that a bad value is a
startup error that names the setting (`SettingError`; the CLI prints it and exits 2) and not a
purge of every batch or a traceback. A test fails when a numeric setting has no range or a
text setting is neither checked here nor listed in `FREE_TEXT`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass

from batchgate.services.common.config import LOG_FORMATS, Settings
from batchgate.services.common.message_budget import max_body_bytes
from batchgate.services.common.webhook_urls import networks
from batchgate.services.common.windows import parse_window

MAX_CUSTOM_ID_COLUMN = 512  # items.custom_id
MAX_SHUTDOWN_GRACE_S = 10.0  # an executor's drain must end within the launcher's 20 s stop limit
MAX_GRPC_MESSAGE_BYTES = 2**31 - 1  # gRPC's channel options are C ints
MIN_GRPC_MESSAGE_BYTES = 2 * 2**20  # a stored file is read in 1 MiB chunks (db.blobs.CHUNK_BYTES)
DATABASE_SCHEMES = ("sqlite+aiosqlite", "postgresql+asyncpg")  # the drivers batchgate ships


class SettingError(ValueError):
    """A setting that cannot be used: `<name> (<env>): <what is wrong, with the value>`."""

    def __init__(self, name: str, env: str, problem: str) -> None:
        problem = " ".join(problem.splitlines())  # printed as one line
        super().__init__(f"{name} ({env}): {problem}")
        self.name = name
        self.env = env
        self.problem = problem


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


@dataclass(frozen=True)
class Bounds:
    """The finite values from `low` to `high` (above `low` when `above`)."""

    low: float
    high: float = math.inf
    above: bool = False
    meaning: str = ""
    """What a bound means, shown with the range (e.g. `0 keeps`)."""

    def admits(self, value: float) -> bool:
        if not math.isfinite(value) or not self.low <= value <= self.high:
            return False
        return not (self.above and value == self.low)

    def __str__(self) -> str:
        if self.low == -math.inf:
            text = "a finite number"
        elif self.above:
            text = f"above {_number(self.low)}"
        elif self.high == math.inf:
            text = f"{_number(self.low)} or more"
        else:
            text = f"{_number(self.low)} to {_number(self.high)}"
        return f"{text} ({self.meaning})" if self.meaning else text


PORT = Bounds(1, 65535)
COUNT = Bounds(1)
DURATION = Bounds(0, above=True)
FRACTION = Bounds(0, 1)

RANGES: dict[str, Bounds] = {
    "sqlite_writer_cache_mib": COUNT,
    "sqlite_reader_cache_mib": COUNT,
    "port": PORT,
    "envoy_admin_port": PORT,
    "ingest_port": PORT,
    "scheduler_port": PORT,
    "results_port": PORT,
    "executor_port": PORT,
    "executors": Bounds(0, meaning="0: none, they run elsewhere"),
    "simulator_port": PORT,
    "simulator_latency_ms": Bounds(0),
    "max_file_bytes": COUNT,
    "max_batch_records": COUNT,
    "max_inline_bytes": COUNT,
    "message_batch_max_requests": COUNT,
    "message_batch_max_bytes": COUNT,
    "max_record_bytes": COUNT,
    "max_custom_id_length": Bounds(1, MAX_CUSTOM_ID_COLUMN, meaning="the column's size"),
    "file_expiry_days": COUNT,
    "idempotency_ttl_s": DURATION,
    "rejected_preview_max": Bounds(0),
    "grpc_max_message_bytes": Bounds(
        MIN_GRPC_MESSAGE_BYTES, MAX_GRPC_MESSAGE_BYTES, meaning="a 1 MiB chunk of a stored file must fit"
    ),
    "executor_concurrency": COUNT,
    "lease_max_items": COUNT,
    "lease_ttl_s": DURATION,
    "lease_wait_ms": COUNT,
    "executor_shutdown_grace_s": Bounds(
        0,
        MAX_SHUTDOWN_GRACE_S,
        meaning="longer would outlast the launcher's and the server's own stop limits",
    ),
    "result_flush_ms": Bounds(0, meaning="0: at once"),
    "result_batch_max": COUNT,
    "request_timeout_s": DURATION,
    "workflow_max_tokens": COUNT,
    "workflow_max_tokens_cap": COUNT,
    "maintenance_interval_s": DURATION,
    "finalize_lease_s": DURATION,
    "ingest_sweep_interval_s": DURATION,
    "validating_timeout_s": DURATION,
    "native_poll_interval_s": DURATION,
    "native_poll_max_interval_s": DURATION,
    "batch_discount_standard": FRACTION,
    "batch_discount_expedited": FRACTION,
    "webhook_timeout_s": DURATION,
    "webhook_max_attempts": COUNT,
    "webhook_retry_initial_s": DURATION,
    "webhook_retry_max_s": DURATION,
    "webhook_concurrency": COUNT,
    "retention_days": Bounds(0, meaning="0 keeps"),
    "bookkeeping_days": Bounds(0, meaning="0 keeps"),
    "retention_interval_s": DURATION,
    "retention_clock_offset_s": Bounds(-math.inf),
    "auth_cache_s": Bounds(0, meaning="0: no cache"),
    "trace_sample_ratio": FRACTION,
    "metrics_port": Bounds(0, 65535, meaning="0: off"),
}


def _database_url(url: str) -> str | None:
    """Only the scheme is shown: the rest may hold a password."""
    scheme, sep, _ = url.partition("://")
    if not url or scheme in DATABASE_SCHEMES:
        return None
    wrong = f"scheme {scheme!r} is not supported" if sep else "it is not a URL (<scheme>://…)"
    return (
        f"{wrong}: use sqlite+aiosqlite:///PATH or postgresql+asyncpg://USER@HOST:PORT/DB "
        "(empty: SQLite in the data directory)"
    )


def _window_problem(window: str) -> str | None:
    try:
        parse_window(window)
    except ValueError:
        return f"{window!r} is not <number><unit> with a unit of s, m, h or d"
    return None


def _windows(raw: str) -> str | None:
    windows = [w.strip() for w in raw.split(",") if w.strip()]
    if not windows:
        return f"{raw!r} names no window (comma-separated <number><unit>, e.g. 24h)"
    return next(filter(None, map(_window_problem, windows)), None)


def _log_level(level: str) -> str | None:
    if level.upper() in logging.getLevelNamesMapping():
        return None
    return f"{level!r} is not a log level (DEBUG, INFO, WARNING, ERROR or CRITICAL)"


def _log_format(fmt: str) -> str | None:
    return None if fmt in LOG_FORMATS else f"{fmt!r} is not one of {', '.join(LOG_FORMATS)}"


def _networks(raw: str, *, none_word: bool = False) -> str | None:
    if none_word and raw.strip().lower() == "none":
        return None
    try:
        networks(raw)
    except ValueError as exc:
        return str(exc)
    return None


@dataclass(frozen=True)
class TextCheck:
    """A text setting's format: `read` returns what is wrong with a value (None: nothing)."""

    read: Callable[[str], str | None]
    shown: str
    """The format in words, for README's settings table."""


NETWORKS = "comma-separated CIDRs"
TEXT_CHECKS: dict[str, TextCheck] = {
    "database_url": TextCheck(_database_url, "`sqlite+aiosqlite://…` or `postgresql+asyncpg://…`"),
    "completion_windows": TextCheck(_windows, "comma-separated `<number><s|m|h|d>`"),
    "message_batch_window": TextCheck(_window_problem, "`<number><s|m|h|d>`"),
    "log_level": TextCheck(_log_level, "a Python log level"),
    "log_format": TextCheck(_log_format, " or ".join(f"`{f}`" for f in LOG_FORMATS)),
    "webhook_allowed_networks": TextCheck(_networks, NETWORKS),
    "tool_allowed_networks": TextCheck(lambda raw: _networks(raw, none_word=True), f"{NETWORKS} or `none`"),
}

FREE_TEXT = frozenset(
    {
        "data_dir",
        "host",
        "envoy_admin_host",
        "ingest_addrs",
        "scheduler_addrs",
        "results_addrs",
        "tls_dir",
        "tls_ca_file",
        "tls_cert_file",
        "tls_key_file",
        "public_base_url",
        "simulator_host",
        "crash_at",
        "template_clock_file",
        "metrics_host",
    }
)
"""Text settings any value of which is read (paths, hosts, lists checked where they are used)."""


def problem(name: str, value: object) -> str | None:
    """What is wrong with `value` for the setting `name` (None: nothing)."""
    bounds = RANGES.get(name)
    if bounds is not None and isinstance(value, int | float) and not bounds.admits(value):
        if not math.isfinite(value):
            within = "" if bounds.low == -math.inf else f" ({bounds})"
            return f"must be a finite number{within}, not {value!r}"
        return f"must be {bounds}, not {_number(value)}"
    check = TEXT_CHECKS.get(name)
    if check is not None and isinstance(value, str):
        return check.read(value)
    return None


def allowed(name: str, kind: str) -> str:
    """The values setting `name` (of Python type `kind`) takes, in words (README's table)."""
    if name in RANGES:
        return str(RANGES[name])
    if name in TEXT_CHECKS:
        return TEXT_CHECKS[name].shown
    return "`true` or `false`" if kind == "bool" else "text"


def _executor_ports(s: Settings) -> str | None:
    last = s.executor_port + s.executors - 1
    if last <= PORT.high:
        return None
    return f"{s.executors} executors listen on {s.executor_port} to {last} (executor_port+N), past 65535"


def _executor_metrics_ports(s: Settings) -> str | None:
    last = s.metrics_port + s.executors
    if not s.metrics_port or last <= PORT.high:
        return None
    return f"{s.executors} executors scrape on {s.metrics_port + 1} to {last} (metrics_port+1+N), past 65535"


def _record_in_a_message(s: Settings) -> str | None:
    most = max_body_bytes(s)
    if s.max_record_bytes <= most:
        return None
    return (
        f"must fit in one gRPC message between the services: at most {most} with "
        f"grpc_max_message_bytes {s.grpc_max_message_bytes}, not {s.max_record_bytes}"
    )


def _not_below(longest: str, first: str) -> Callable[[Settings], str | None]:
    def check(s: Settings) -> str | None:
        high, low = getattr(s, longest), getattr(s, first)
        return None if high >= low else f"must not be below {first} ({_number(low)}), not {_number(high)}"

    return check


CONFLICTS: tuple[tuple[str, Callable[[Settings], str | None]], ...] = (
    ("executors", _executor_ports),
    ("executors", _executor_metrics_ports),
    ("max_record_bytes", _record_in_a_message),
    ("native_poll_max_interval_s", _not_below("native_poll_max_interval_s", "native_poll_interval_s")),
    ("webhook_retry_max_s", _not_below("webhook_retry_max_s", "webhook_retry_initial_s")),
    ("workflow_max_tokens_cap", _not_below("workflow_max_tokens_cap", "workflow_max_tokens")),
)
"""(the setting named in the error, what is wrong with it given the others); checked after
every setting passed its own check."""


def conflict(settings: Settings) -> tuple[str, str] | None:
    """The first setting that conflicts with another, and what is wrong (None: none does)."""
    for name, check in CONFLICTS:
        wrong = check(settings)
        if wrong:
            return name, wrong
    return None
