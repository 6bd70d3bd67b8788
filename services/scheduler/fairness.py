"""How one lease call's capacity is shared among runnable batches.

Strict priority first: only batches of the highest (tier, integer priority) present get
capacity in a round. Within that group the capacity is split evenly across projects, then
evenly across each project's batches, so one large batch (or one busy project) cannot starve
a small one that arrived later. Leftovers (batches that ran dry) flow to the next round.
A rotating offset decides who gets the odd units when capacity is smaller than the group.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Candidate:
    batch_id: str
    project_id: str
    tier: int
    priority: int
    created_at: float


def _split(total: int, ways: int, offset: int) -> list[int]:
    """`total` in `ways` near-equal parts; the +1 parts start at `offset`."""
    base, extra = divmod(total, ways)
    return [base + (1 if (i - offset) % ways < extra else 0) for i in range(ways)]


def top_group(candidates: Sequence[Candidate]) -> list[Candidate]:
    """The candidates sharing the highest (tier, priority), oldest first."""
    if not candidates:
        return []
    best = max((c.tier, c.priority) for c in candidates)
    return sorted((c for c in candidates if (c.tier, c.priority) == best), key=lambda c: c.created_at)


def allocate(group: Sequence[Candidate], capacity: int, offset: int = 0) -> list[tuple[Candidate, int]]:
    """Shares of `capacity` for each batch of one priority group (zero shares left out)."""
    if capacity <= 0 or not group:
        return []
    by_project: dict[str, list[Candidate]] = {}
    for c in group:  # insertion order = age order of each project's oldest batch
        by_project.setdefault(c.project_id, []).append(c)
    shares: list[tuple[Candidate, int]] = []
    for project_share, batches in zip(
        _split(capacity, len(by_project), offset), by_project.values(), strict=True
    ):
        for batch, share in zip(batches, _split(project_share, len(batches), offset), strict=True):
            if share:
                shares.append((batch, share))
    return shares
