"""JSONL lines that stay one line for every reader, and JSON kept at its own size.

JSON allows U+0085, U+2028 and U+2029 raw inside strings, and orjson writes them raw, but
Python's `str.splitlines()` (and JavaScript before ES2019) break lines on them: a user who
reads a file with `text.splitlines()` would get half records. Escaped, they parse back to the
same strings. In UTF-8 their byte sequences cannot occur inside any other character, so a
bytes replacement is exact.
"""

from __future__ import annotations

from typing import Any

import orjson

_LINE_BREAKS = ((b"\xc2\x85", b"\\u0085"), (b"\xe2\x80\xa8", b"\\u2028"), (b"\xe2\x80\xa9", b"\\u2029"))


def one_line(data: bytes) -> bytes:
    """`data` (JSON) with every character that some readers take for a line break escaped."""
    for raw, escaped in _LINE_BREAKS:
        if raw in data:
            data = data.replace(raw, escaped)
    return data


def dumps_line(value: Any) -> bytes:
    """`value` as one JSONL line, newline included."""
    return one_line(orjson.dumps(value)) + b"\n"


def exact(data: bytes) -> bytes:
    """`data` in an object of its own size, for JSON that is kept (item bodies on their way
    to the database). `orjson.dumps` answers a bytes object that keeps the buffer it grew:
    4 KiB at least, 32 KiB for a 3.9 KB body, 256 KiB for a 20 KB one, so the 1,000 bodies a
    create holds at once took ~31 MiB instead of ~4."""
    return bytes(memoryview(data))
