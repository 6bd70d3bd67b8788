"""A project's retention periods as the scheduler's purge reads them from its stored policy."""

from __future__ import annotations

import math

import pytest

from batchgate.services.common.access_policy import Policy
from batchgate.services.common.config import Settings
from batchgate.services.scheduler.retention import Retention


def _periods(policy: Policy) -> tuple[float, float]:
    return Retention(None, Settings(retention_days=30, bookkeeping_days=400)).periods(policy)  # type: ignore[arg-type]


def test_a_project_policy_overrides_the_settings_and_bookkeeping_outlasts_the_data() -> None:
    assert _periods(Policy()) == (30, 400)
    assert _periods(Policy(retention_days=7, bookkeeping_days=2)) == (7, 7)
    assert _periods(Policy(retention_days=0)) == (0, 0)
    assert _periods(Policy(bookkeeping_days=0)) == (30, 0)


@pytest.mark.parametrize("stored", [-1.0, -math.inf, math.inf, math.nan])
def test_a_stored_period_the_cli_refuses_falls_back_to_the_setting(stored: float) -> None:
    """-1 days made every ended batch of the project due at the next pass."""
    assert _periods(Policy(retention_days=stored, bookkeeping_days=stored)) == (30, 400)
