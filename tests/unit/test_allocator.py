"""A service process caps its malloc arenas, unless the operator chose a number."""

from __future__ import annotations

import platform

import pytest

from batchgate.services.common.allocator import limit_arenas


def test_an_operators_malloc_arena_max_is_left_alone() -> None:
    assert limit_arenas({"MALLOC_ARENA_MAX": "8"}) is False


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc only")
def test_glibc_takes_the_cap() -> None:
    assert limit_arenas({}) is True
