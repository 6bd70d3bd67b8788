"""Capacity sharing: strict priority between groups, even shares within one."""

from __future__ import annotations

from batchgate.services.scheduler.fairness import Candidate, allocate, top_group


def batch(ident: str, project: str = "p", tier: int = 0, priority: int = 0, age: float = 0.0) -> Candidate:
    return Candidate(ident, project, tier, priority, age)


def test_expedited_beats_standard_and_higher_integer_priority_beats_lower() -> None:
    group = top_group([batch("old", age=1), batch("hi", priority=5, age=3), batch("exp", tier=1, age=9)])
    assert [c.batch_id for c in group] == ["exp"]
    group = top_group([batch("a", age=2), batch("hi", priority=5, age=3), batch("b", age=1)])
    assert [c.batch_id for c in group] == ["hi"]


def test_a_large_old_batch_does_not_starve_a_small_new_one() -> None:
    shares = dict((c.batch_id, n) for c, n in allocate([batch("large", age=1), batch("small", age=2)], 100))
    assert shares == {"large": 50, "small": 50}


def test_projects_share_evenly_before_their_batches_do() -> None:
    group = [
        batch("a1", "A", age=1),
        batch("a2", "A", age=2),
        batch("a3", "A", age=3),
        batch("b1", "B", age=4),
    ]
    shares = {c.batch_id: n for c, n in allocate(group, 120)}
    assert shares["b1"] == 60
    assert shares["a1"] + shares["a2"] + shares["a3"] == 60


def test_odd_units_rotate_so_every_batch_gets_a_turn() -> None:
    group = [batch(f"b{i}", age=i) for i in range(4)]
    winners = set()
    for offset in range(4):
        winners |= {c.batch_id for c, n in allocate(group, 1, offset) if n}
    assert winners == {"b0", "b1", "b2", "b3"}
