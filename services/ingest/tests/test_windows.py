"""Completion windows: `<number><unit>` with units s, m, h, d."""

from __future__ import annotations

import pytest

from batchgate.services.common.errors import ApiError
from batchgate.services.ingest.create_checks import window_seconds


@pytest.mark.parametrize("window, seconds", [("24h", 86400), ("5s", 5), ("90m", 5400), ("2d", 172800)])
def test_window_units(window: str, seconds: int) -> None:
    assert window_seconds(window) == seconds


@pytest.mark.parametrize("window", ["", "h", "24", "24x", "0s", "-5s", "1.5h"])
def test_unreadable_windows_are_invalid_requests(window: str) -> None:
    with pytest.raises(ApiError) as caught:
        window_seconds(window)
    assert caught.value.status == 400 and caught.value.param == "completion_window"
