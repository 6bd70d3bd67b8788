"""What an upstream's answer headers say about waiting: `Retry-After` (the call's own wait before
its retry) and a spent rate-limit window (the whole key must rest).

A provider reports its windows as OpenAI does (`x-ratelimit-remaining-requests` /
`-tokens` with `x-ratelimit-reset-requests` / `-tokens` as durations like `1s`, `6m0s`,
`20ms`) or as Anthropic does (`anthropic-ratelimit-{requests,tokens,input-tokens,
output-tokens}-remaining` with `…-reset` as an RFC 3339 time).
"""

from __future__ import annotations

import email.utils
import math
import re
import time
from collections.abc import Mapping
from datetime import datetime

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
OPENAI_WINDOWS = ("requests", "tokens")
ANTHROPIC_WINDOWS = ("requests", "tokens", "input-tokens", "output-tokens")


def _seconds(text: str) -> float | None:
    """A number of seconds (below zero: none), or None where `text` is not a finite number."""
    try:
        value = float(text)
    except ValueError:
        return None
    return max(value, 0.0) if math.isfinite(value) else None


def retry_after_s(headers: Mapping[str, str]) -> float | None:
    """Seconds from `retry-after-ms` or `retry-after` (seconds or an HTTP date); None where
    neither is given or readable. A value that is neither (`soon`, `nan`) asks for no wait: it
    raised out of the call, and failed answers already paid for (a 200 too) `internal_error`."""
    if (ms := headers.get("retry-after-ms")) is not None and (wait := _seconds(ms)) is not None:
        return wait / 1000
    value = headers.get("retry-after")
    if not value:
        return None
    if (wait := _seconds(value)) is not None:
        return wait
    try:
        parsed = email.utils.parsedate_to_datetime(value)
    except (ValueError, TypeError, IndexError, OverflowError):
        return None
    return max(parsed.timestamp() - time.time(), 0.0)


def _duration_s(text: str | None) -> float | None:
    """`1m30.5s`, `20ms`, `6m0s`, or a bare number of seconds."""
    if not text:
        return None
    text = text.strip()
    if (seconds := _seconds(text)) is not None:
        return seconds
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return sum(float(number) * _UNIT_S[unit] for number, unit in parts)


def _until_s(text: str | None) -> float | None:
    """Seconds until an RFC 3339 time."""
    if not text:
        return None
    try:
        return max(datetime.fromisoformat(text.strip().replace("Z", "+00:00")).timestamp() - time.time(), 0.0)
    except ValueError:
        return None


def _spent(remaining: str | None) -> bool:
    try:
        return remaining is not None and float(remaining) <= 0
    except ValueError:
        return False


def spent_window_s(headers: Mapping[str, str], default_s: float) -> float | None:
    """How long the key must rest when the answer says one of its windows is spent
    (`default_s` when it gives no reset time); None when none is."""
    waits: list[float] = []
    for window in OPENAI_WINDOWS:
        if _spent(headers.get(f"x-ratelimit-remaining-{window}")):
            reset = _duration_s(headers.get(f"x-ratelimit-reset-{window}"))
            waits.append(default_s if reset is None else reset)
    for window in ANTHROPIC_WINDOWS:
        if _spent(headers.get(f"anthropic-ratelimit-{window}-remaining")):
            reset = _until_s(headers.get(f"anthropic-ratelimit-{window}-reset"))
            waits.append(default_s if reset is None else reset)
    return max(waits) if waits else None
