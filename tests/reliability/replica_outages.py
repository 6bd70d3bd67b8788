"""What the tests of a replica going away share: a stack with two replicas of every service on
PostgreSQL, a batch running through it, the maintenance leader found from the schedulers' logs,
and one victim per service (the leader among the schedulers), picked once the batch is under way
and Envoy sees every replica healthy."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.execution_support import create_batch, wait_until
from tests.support import RunningStack, chat_records, fresh_database, replicated_stack

LEADER_LINE = "maintenance leader;"
REPLICAS = {"ingest": 2, "scheduler": 2, "results": 2, "executor": 2}


def leaders(stack: RunningStack) -> list[Any]:
    """The schedulers that have led maintenance (their log says so), in start order."""
    schedulers = [c for c in stack.stack.children if c.role == "scheduler"]
    return [c for c in schedulers if LEADER_LINE in (stack.log_dir / f"{c.name}.log").read_text()]


def envoy_hosts_healthy(stack: RunningStack) -> bool:
    """Every host of every cluster healthy in Envoy's admin `/clusters` (`…::health_flags::healthy`)."""
    admin = f"http://127.0.0.1:{stack.settings.envoy_admin_port}/clusters"
    flags = [line for line in httpx.get(admin, timeout=5).text.splitlines() if "::health_flags::" in line]
    return bool(flags) and all(line.endswith("::health_flags::healthy") for line in flags)


@dataclass(frozen=True, kw_only=True)
class Midway:
    stack: RunningStack
    batch: Any
    records: list[dict[str, Any]]
    victims: list[Any]
    """The maintenance leader, then one replica each of ingest, results and executor."""


@contextmanager
def batch_midway(
    tmp_path: Path, *, records: int, prefix: str, done: int, concurrency: int
) -> Iterator[Midway]:
    """A batch of `records` 50 ms requests on two replicas of everything, `done` of them
    completed; the promise is about a replica going away while its peer serves, so it waits
    until Envoy has seen every replica healthy (one that started after Envoy's first check
    joins at its next one)."""
    with (
        fresh_database("postgres", tmp_path) as url,
        replicated_stack(
            tmp_path,
            url,
            REPLICAS,
            BATCHGATE_EXECUTORS="2",
            BATCHGATE_MAINTENANCE_INTERVAL_S="0.5",
            BATCHGATE_EXECUTOR_CONCURRENCY=str(concurrency),
        ) as stack,
    ):
        client = stack.client()
        lines = chat_records(records, prefix=prefix, x_sim={"delay_ms": 50})
        batch = create_batch(stack, lines)
        wait_until("a maintenance leader", lambda: len(leaders(stack)) == 1, timeout_s=60)
        wait_until(
            f"{done} done",
            lambda: client.batches.retrieve(batch.id).request_counts.completed >= done,
            timeout_s=120,
        )
        wait_until("Envoy sees every replica healthy", lambda: envoy_hosts_healthy(stack), timeout_s=30)
        victims = [leaders(stack)[0]] + [
            next(c for c in stack.stack.children if c.role == service)
            for service in ("ingest", "results", "executor")
        ]
        yield Midway(stack=stack, batch=batch, records=lines, victims=victims)
