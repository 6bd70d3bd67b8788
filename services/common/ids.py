"""Public identifiers: a prefix plus a ULID-style body (48-bit milliseconds + 80 random bits).

Ids sort by creation time as plain strings, which makes keyset paging (`after=<id>`) and
"newest first" listings a primary-key range scan.
"""

from __future__ import annotations

import hashlib
import os
import time

_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"  # Crockford base32, lowercase
MAX_ID_LENGTH = 40  # the id columns' size
ID_BODY_LENGTH = 26  # 10 characters of milliseconds, 16 random
FILE_ID_PREFIX = "file-"
BATCH_ID_PREFIX = "batch_"


def _encode(value: int, length: int) -> str:
    chars = []
    for _ in range(length):
        chars.append(_ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(chars))


def plausible_id(ident: str) -> bool:
    """Whether `ident` could name a row at all (PostgreSQL refuses NUL in text parameters)."""
    return 0 < len(ident) <= MAX_ID_LENGTH and "\x00" not in ident


def well_formed(ident: str, prefix: str) -> bool:
    """Whether `ident` is an id `new_id(prefix)` could have made (its object may be gone)."""
    body = ident[len(prefix) :]
    return ident.startswith(prefix) and len(body) == ID_BODY_LENGTH and all(c in _ALPHABET for c in body)


def new_id(prefix: str) -> str:
    """`prefix` + 26 chars; later calls sort after earlier ones (to the millisecond)."""
    millis = int(time.time() * 1000)
    return prefix + _encode(millis, 10) + _encode(int.from_bytes(os.urandom(10), "big"), 16)


def file_id() -> str:
    return new_id(FILE_ID_PREFIX)


def batch_id() -> str:
    return new_id(BATCH_ID_PREFIX)


def message_batch_id() -> str:
    """An Anthropic Message Batch's id (`services.common.api_shapes`)."""
    return new_id("msgbatch_")


def project_id() -> str:
    return new_id("proj_")


def api_key_id() -> str:
    return new_id("key_")


def request_line_id(batch: str, index: int) -> str:
    """The `batch_req_…` id of an item's output line: derived, so rewriting a file is stable."""
    digest = hashlib.blake2b(f"{batch}:{index}".encode(), digest_size=16).hexdigest()
    return f"batch_req_{digest}"
