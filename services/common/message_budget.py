"""How much one gRPC message between the services may carry when it holds many items' bodies:
a lease (requests, scheduler → executor) and a RecordResults call (answers, executor → results).

A message past `grpc_max_message_bytes` is refused (RESOURCE_EXHAUSTED) on every try, and both
flows then stopped for good: a lease of 200 long prompts (400 KB each) was leased in the
database but never reached its executor, and a group of large answers held every later outcome
of its executor behind it. So each message takes the oldest entries that fit (always at least
one) and leaves the rest to the next.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from batchgate.services.common.config import Settings

ENTRY_OVERHEAD = 1024
"""Bytes an entry may take besides its body and texts (ids, names, usage, traceparent),
rounded up."""

Entry = TypeVar("Entry")


def message_budget(settings: Settings) -> int:
    """Bytes of entries one message may carry: the gRPC limit with an eighth to spare for the
    message's own fields."""
    return settings.grpc_max_message_bytes * 7 // 8


def max_body_bytes(settings: Settings) -> int:
    """The largest body one entry can have: alone, it fills a message."""
    return message_budget(settings) - ENTRY_OVERHEAD


def fitting(entries: Sequence[Entry], size: Callable[[Entry], int], budget: int) -> int:
    """How many of the first `entries` fit in `budget` bytes (`size` of each, overhead
    included); at least one when there is one."""
    total = 0
    for count, entry in enumerate(entries):
        total += size(entry)
        if count and total > budget:
            return count
    return len(entries)
