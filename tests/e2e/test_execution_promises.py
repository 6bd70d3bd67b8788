"""The execution promises as a user sees them at the upstream, which records when each call
STARTS (`tests/fake_upstream.py`): expedited work starts before queued standard work, no call
starts for a cancelled batch after the cancel bound, and a provider that caps its concurrency
(answering 429 beyond it) runs at its capacity.

One stack per database kind serves the module; each provider is its own fake upstream: `slow`
(0.2 s a call, 16 at once), `glacial` (3 s a call, 4 at once), and `capped` / `capped-ra`
(50 ms a call; the upstream serves 16 at once and answers 429 beyond, without and with
`Retry-After: 1`; the provider allows 64, so the executor must find the capacity itself). Executors
run 24 calls at once, so they are full (3 × 24 held) while a standard backlog runs and an
expedited batch must be leased beyond that.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.execution_support import assert_each_custom_id_once, create_batch, result_lines, wait_until
from tests.fake_upstream import FakeUpstream, catalogue, records
from tests.support import RunningStack, fresh_database, running_stack, wait_for_batch

pytestmark = pytest.mark.alone  # it bounds how long things take

CANCEL_BOUND_S = 0.2  # README: no call starts for a cancelled batch later than this after the answer
MARGIN_S = 0.5  # a noisy 2-core machine


@pytest.fixture(scope="module")
def upstreams(db_kind: str) -> Iterator[dict[str, FakeUpstream]]:
    """Fresh upstreams for each database kind's stack."""
    with (
        FakeUpstream(latency_s=0.2) as slow,
        FakeUpstream(latency_s=0.05, capacity=16) as capped,
        FakeUpstream(latency_s=0.05, capacity=16, retry_after_s=1) as capped_ra,
        FakeUpstream(latency_s=3.0) as glacial,
    ):
        yield {"slow": slow, "capped": capped, "capped-ra": capped_ra, "glacial": glacial}


@pytest.fixture(scope="module")
def stack(
    db_kind: str, upstreams: dict[str, FakeUpstream], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningStack]:
    tmp: Path = tmp_path_factory.mktemp(f"promises-{db_kind}")
    concurrency = {"slow": 16, "capped": 64, "capped-ra": 64, "glacial": 4}
    config = catalogue(
        tmp / "catalogue.yaml",
        {
            name: {
                "base_url": upstream.base_url,
                "api_keys": [f"key-{name}"],
                "max_concurrency": concurrency[name],
            }
            for name, upstream in upstreams.items()
        },
    )
    with (
        fresh_database(db_kind, tmp) as url,
        running_stack(tmp, url, BATCHGATE_CONFIG=config, BATCHGATE_EXECUTOR_CONCURRENCY="24") as running,
    ):
        yield running


def test_expedited_calls_start_before_the_remaining_standard_ones(
    stack: RunningStack, upstreams: dict[str, FakeUpstream]
) -> None:
    upstream = upstreams["slow"]
    standard = create_batch(stack, records("slow", "std", 200))
    wait_until("standard running", lambda: any(c.content.startswith("std-") for c in upstream.calls()), 30)
    asked = time.time()
    expedited = create_batch(stack, records("slow", "exp", 20), priority="expedited")
    client = stack.client()
    wait_for_batch(client, expedited.id, timeout_s=60)
    wait_for_batch(client, standard.id, timeout_s=60)
    calls = [c for c in upstream.calls() if c.content.startswith(("std-", "exp-"))]
    exp_starts = sorted(c.started for c in calls if c.content.startswith("exp-"))
    assert len(exp_starts) == 20
    first, last = exp_starts[0], exp_starts[-1]
    overtaking = [c for c in calls if c.content.startswith("std-") and first < c.started < last]
    assert not overtaking, f"{len(overtaking)} standard calls started between the expedited ones"
    later = [c for c in calls if c.content.startswith("std-") and c.started >= last]
    assert len(later) >= 50, "the expedited batch did not wait behind a standard backlog"
    assert first - asked < 5.0, f"the first expedited call started {first - asked:.2f}s after create"


def test_an_expedited_batch_takes_the_first_slot_that_frees_behind_slow_calls(
    stack: RunningStack, upstreams: dict[str, FakeUpstream]
) -> None:
    """The executor is full (72 held) of 3 s calls, 4 at a time: the expedited batch is leased
    at once and its calls take the first slots that free. It was leased only once a slot had
    freed, which a waiting standard item had taken: it waited for the next round of slots."""
    upstream = upstreams["glacial"]
    client = stack.client()
    standard = create_batch(stack, records("glacial", "slow-std", 100))
    wait_until("4 standard running", lambda: len(upstream.calls()) == 4, 30, every_s=0.01)
    time.sleep(0.5)
    asked = time.time()
    expedited = create_batch(stack, records("glacial", "slow-exp", 2), priority="expedited")
    started = lambda: any(c.content.startswith("slow-exp-") for c in upstream.calls())  # noqa: E731
    wait_until("an expedited call started", started, 30, every_s=0.01)
    calls = upstream.calls()
    first_exp = min(c.started for c in calls if c.content.startswith("slow-exp-"))
    overtaking = [c for c in calls if c.content.startswith("slow-std-") and asked < c.started < first_exp]
    assert not overtaking, f"{len(overtaking)} standard calls started before the expedited ones"
    client.batches.cancel(standard.id)
    wait_for_batch(client, expedited.id, timeout_s=60)
    wait_for_batch(client, standard.id, timeout_s=60)


def test_no_call_starts_for_a_cancelled_batch_after_the_bound(
    stack: RunningStack, upstreams: dict[str, FakeUpstream]
) -> None:
    upstream = upstreams["slow"]
    client = stack.client()
    batch = create_batch(stack, records("slow", "cn", 300, x_delay_ms=300))
    wait_until(
        "32 done",
        lambda: client.batches.retrieve(batch.id).request_counts.completed >= 32,
        timeout_s=60,
    )
    assert client.batches.cancel(batch.id).status == "cancelling"
    answered = time.time()
    done = wait_for_batch(client, batch.id, timeout_s=60)
    assert done.status == "cancelled"
    starts = [c.started for c in upstream.calls() if c.content.startswith("cn-")]
    late = [round(s - answered, 3) for s in starts if s > answered + CANCEL_BOUND_S + MARGIN_S]
    assert not late, f"calls started this long after the cancel answered: {late}"
    output, errors = result_lines(client, done)
    assert_each_custom_id_once(output, errors, [f"cn-{i}" for i in range(300)])
    assert len(output) <= len(starts) < 100
    assert {line["error"]["code"] for line in errors} == {"batch_cancelled"}


@pytest.mark.parametrize("model", ["capped", "capped-ra"])
def test_a_concurrency_capped_provider_runs_at_its_capacity(
    stack: RunningStack, upstreams: dict[str, FakeUpstream], model: str
) -> None:
    upstream = upstreams[model]
    n = 2000
    batch = create_batch(stack, records(model, model, n))
    done = wait_for_batch(stack.client(), batch.id, timeout_s=180)
    assert (done.status, done.request_counts.completed, done.request_counts.failed) == ("completed", n, 0)
    calls = [c for c in upstream.calls() if c.content.startswith(f"{model}-")]
    served = [c for c in calls if c.status == 200]
    assert len(served) == n
    span = max(c.ended or c.started for c in served) - min(c.started for c in calls)
    capacity_s = n / 16 * upstream.latency_s
    fraction = capacity_s / span
    rate_limited = sum(1 for c in calls if c.status == 429)
    assert fraction >= 0.8, f"{fraction:.2f} of the capacity's throughput ({span:.1f}s for {n} calls)"
    assert rate_limited <= 0.05 * len(calls), f"{rate_limited} of {len(calls)} calls answered 429"
