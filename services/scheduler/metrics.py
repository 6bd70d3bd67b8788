"""The scheduler's instruments: leases, how long items wait for one, and the queue's depth.

The depth is counted by the maintenance leader every `DEPTH_INTERVAL_S` (two grouped
queries) and reported from that cache, so a scrape never touches the database and replicas
do not report the same queue twice.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from opentelemetry.metrics import CallbackOptions, Meter, NoOpMeter, Observation

from batchgate.services.common.telemetry import WAIT_BUCKETS

DEPTH_INTERVAL_S = 10.0
TIERS = ("standard", "expedited")  # batches.priority_tier 0 and 1


def tier_name(tier: int) -> str:
    return TIERS[1] if tier else TIERS[0]


class SchedulerMetrics:
    def __init__(self, meter: Meter | None = None) -> None:
        meter = meter or NoOpMeter("batchgate")
        self.enabled = not isinstance(meter, NoOpMeter)
        self.items_leased = meter.create_counter(
            "batchgate.items.leased",
            unit="{item}",
            description="Items handed to executors, by priority tier.",
        )
        self.lease_wait = meter.create_histogram(
            "batchgate.lease.wait",
            unit="s",
            description="Time from a batch's creation to a lease of its items (queueing delay); one "
            "observation per batch per lease call.",
            explicit_bucket_boundaries_advisory=WAIT_BUCKETS,
        )
        self.leases_rescued = meter.create_counter(
            "batchgate.leases.rescued",
            unit="{item}",
            description="Leases that lapsed (executor gone or stalled) and were queued again.",
        )
        self._depth: dict[tuple[str, str], int] = {}
        meter.create_observable_gauge(
            "batchgate.queue.depth",
            callbacks=[self._observe_depth],
            unit="{item}",
            description="Open items of running batches by priority tier and state (queued, leased), "
            f"counted every {DEPTH_INTERVAL_S:g} s by the maintenance leader.",
        )

    def set_depth(self, depth: Mapping[tuple[int, str], int]) -> None:
        """The latest count, (priority tier, state) → items; empty when not the leader."""
        self._depth = {(tier_name(tier), state): count for (tier, state), count in depth.items()}

    def _observe_depth(self, _options: CallbackOptions) -> Iterable[Observation]:
        return [
            Observation(count, {"priority": tier, "state": state})
            for (tier, state), count in self._depth.items()
        ]
