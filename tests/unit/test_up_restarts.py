"""`batchgate up` starts a process that died again, unless it keeps dying (`Restarts`)."""

from __future__ import annotations

from batchgate.server_cli import Restarts


def test_a_process_is_started_again_until_it_dies_five_times_within_a_minute() -> None:
    restarts = Restarts()
    assert all(restarts.allow("executor-0", at) for at in (0.0, 10.0, 20.0, 30.0, 40.0))
    assert not restarts.allow("executor-0", 50.0)  # the sixth death within 60 s: it cannot run
    assert restarts.allow("core", 50.0)  # counted per process
    assert restarts.allow("executor-0", 200.0)  # the old deaths have left the window
