"""A key's requests-per-minute budget holds for the whole deployment, however many executors
draw from it: three executors (one more than `BATCHGATE_EXECUTORS` says) share one key of 60
requests a minute, and the upstream sees what one token bucket allows (60 at once, then one a
second), measured over windows from its first call."""

from __future__ import annotations

from pathlib import Path

from tests.execution_support import create_batch, private_stack
from tests.fake_upstream import FakeUpstream, catalogue, records
from tests.support import wait_for_batch

RPM = 60
N = RPM + 6


def test_executors_share_one_keys_budget(db_kind: str, tmp_path: Path) -> None:
    with FakeUpstream(latency_s=0.01) as upstream:
        provider = {"base_url": upstream.base_url, "api_keys": ["k"], "requests_per_minute": RPM}
        config = catalogue(tmp_path / "catalogue.yaml", {"fake": provider})
        with private_stack(db_kind, tmp_path, BATCHGATE_CONFIG=config, BATCHGATE_EXECUTORS="2") as stack:
            stack.stack.start_executor(2)
            stack.stack.wait_ready()
            client = stack.client()
            batch = create_batch(stack, records("fake", "b", N))
            done = wait_for_batch(client, batch.id, timeout_s=90)
            assert (done.status, done.request_counts.completed) == ("completed", N)
    starts = sorted(c.started for c in upstream.calls())
    assert len(starts) == N  # nothing was refused or repeated
    first = starts[0]
    for window_s in (1.0, 3.0, 5.0):
        seen = sum(1 for s in starts if s <= first + window_s)
        assert seen <= RPM + window_s * RPM / 60 + 1, f"{seen} calls in the first {window_s:g}s"
    assert starts[-1] - first >= 4.0  # the last six waited for the budget to refill
