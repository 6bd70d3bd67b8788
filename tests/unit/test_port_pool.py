"""The tests' listening ports: pytest-xdist workers (`make test` runs two) never share one."""

from __future__ import annotations

import pytest

from tests.support import _worker_share

POOL = range(20_000, 32_000)


def _share(monkeypatch: pytest.MonkeyPatch, worker: str | None, count: str | None) -> range:
    for name, value in (("PYTEST_XDIST_WORKER", worker), ("PYTEST_XDIST_WORKER_COUNT", count)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    return _worker_share(POOL)


def test_outside_xdist_the_whole_pool_is_ours(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _share(monkeypatch, None, None) == POOL


@pytest.mark.parametrize("count", [2, 3, 5])
def test_workers_take_disjoint_slices_of_the_pool(monkeypatch: pytest.MonkeyPatch, count: int) -> None:
    shares = [set(_share(monkeypatch, f"gw{i}", str(count))) for i in range(count)]
    assert all(len(share) == len(POOL) // count for share in shares)
    assert set.union(*shares) <= set(POOL)
    assert sum(map(len, shares)) == len(set.union(*shares))  # no port in two slices
