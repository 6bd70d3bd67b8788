"""Completion windows and other durations written as `<number><unit>` (`24h`, `7d`)."""

from __future__ import annotations

WINDOW_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_window(window: str) -> int:
    """'24h' → 86400; units s, m, h, d (short windows are for tests and demos). ValueError when
    it is not a positive `<number><unit>`."""
    try:
        seconds = int(window[:-1]) * WINDOW_UNITS[window[-1]]
    except (KeyError, ValueError, IndexError):
        raise ValueError(f"unreadable completion window {window!r}") from None
    if seconds <= 0:
        raise ValueError(f"unreadable completion window {window!r}")
    return seconds
