"""The custom_ids a batch's records used so far: exact, in a fraction of a set's memory.

A create rejects a record whose custom_id an earlier accepted record of the same input used,
so it remembers every custom_id of the input. A Python set of a million short ids holds
~90 MiB (an object of ~65 bytes per string, plus ~32 MiB of table) for the whole create.
`SeenIds` packs the ids into `BUCKETS` strings instead, each id written `\\0id\\0` into the
bucket its hash picks: a million 15-character ids take ~20 MiB, and a lookup is one
substring search in a bucket of ~15 ids (done in C). The NUL separators make the answer
exact: an id is found only whole. Ids holding a NUL themselves (the checkers refuse them
first) are kept in a plain set.
"""

from __future__ import annotations

BUCKETS = 1 << 16
"""512 KiB of bucket list; a million ids put ~15 in each bucket."""
_MASK = BUCKETS - 1
_SEP = "\0"


class SeenIds:
    """`id in seen` and `seen.add(id)`, as for a set of strings."""

    def __init__(self) -> None:
        self._buckets = [_SEP] * BUCKETS  # every bucket starts and ends with a separator
        self._with_nul: set[str] = set()
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def __contains__(self, custom_id: str) -> bool:
        if _SEP in custom_id:
            return custom_id in self._with_nul
        return f"{_SEP}{custom_id}{_SEP}" in self._buckets[hash(custom_id) & _MASK]

    def add(self, custom_id: str) -> None:
        """Remember `custom_id` (the caller has checked that it is new)."""
        self._count += 1
        if _SEP in custom_id:
            self._with_nul.add(custom_id)
            return
        index = hash(custom_id) & _MASK
        self._buckets[index] = f"{self._buckets[index]}{custom_id}{_SEP}"
