"""Helpers for tests of execution: a provider catalogue on the simulator, reading item states
straight from the database, collecting a finished batch's lines, waiting through outages."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import openai
import yaml
from sqlalchemy import func, select

from batchgate.services.common.db import Database
from batchgate.services.common.db.schema import items
from tests.support import TERMINAL, RunningStack, fresh_database, read_jsonl, running_stack, upload

FAST_RETRY = {"initial_interval_s": 0.1, "backoff_coefficient": 2.0, "max_interval_s": 0.5, "max_attempts": 3}


def write_catalogue(path: Path, simulator_port: int, **provider: Any) -> str:
    """A YAML config: OpenAI-compatible and Anthropic providers on the simulator, a fallback
    chain gpt-4o-mini → gpt-4o, a model with a 1.5 s time limit (`gpt-4o-strict`), an Anthropic
    model, and a fast retry policy."""
    base = f"http://127.0.0.1:{simulator_port}/v1"
    doc = {
        "providers": [
            {"name": "simulated", "kind": "openai", "base_url": base, "api_keys": ["sim"], **provider},
            {"name": "simulated-anthropic", "kind": "anthropic", "base_url": base, "api_keys": ["sim-a"]},
            {
                "name": "simulated-strict",
                "kind": "openai",
                "base_url": base,
                "api_keys": ["sim"],
                "timeout_s": 1.5,
            },
        ],
        "models": [
            {"name": "gpt-4o-mini", "provider": "simulated", "fallbacks": ["gpt-4o"]},
            {"name": "gpt-4o", "provider": "simulated"},
            {"name": "gpt-4o-strict", "provider": "simulated-strict", "upstream_model": "gpt-4o"},
            {"name": "claude-haiku-4-5", "provider": "simulated-anthropic"},
        ],
        "retry": FAST_RETRY,
    }
    path.write_text(yaml.safe_dump(doc))
    return str(path)


@contextlib.contextmanager
def private_stack(db_kind: str, tmp: Path, **env: str) -> Iterator[RunningStack]:
    """A stack of its own on a fresh database, for a test that kills or reconfigures processes."""
    with fresh_database(db_kind, tmp) as url, running_stack(tmp, url, **env) as stack:
        yield stack


def crash_then_restart_executor(stack: RunningStack) -> None:
    """Start executor 0, which dies (exit 137) at the crash point `BATCHGATE_CRASH_AT` arms,
    then start it again with none armed."""
    crashed = stack.stack.start_executor(0)
    assert crashed.process is not None and crashed.process.wait(60) == 137
    stack.stack.children.remove(crashed)
    stack.stack.env.pop("BATCHGATE_CRASH_AT")
    stack.stack.start_executor(0)


def create_batch(
    stack: RunningStack, records: list[dict[str, Any]], window: str = "24h", **extra: Any
) -> Any:
    """Upload `records` and create a chat batch of them; `extra` goes in the body (`priority`, …)."""
    client = stack.client(timeout=600)
    return client.batches.create(
        input_file_id=upload(client, records).id,
        endpoint="/v1/chat/completions",
        completion_window=window,
        extra_body=extra or None,
    )


def item_states(database_url: str, batch_id: str) -> Counter[str]:
    async def read() -> Counter[str]:
        db = Database(database_url)
        try:
            async with db.read() as conn:
                rows = await conn.execute(
                    select(items.c.state, func.count())
                    .where(items.c.batch_id == batch_id)
                    .group_by(items.c.state)
                )
                return Counter({state: count for state, count in rows})
        finally:
            await db.dispose()

    return asyncio.run(read())


def item_rows(database_url: str, batch_id: str) -> list[Any]:
    async def read() -> list[Any]:
        db = Database(database_url)
        try:
            async with db.read() as conn:
                return list(
                    (
                        await conn.execute(
                            select(items).where(items.c.batch_id == batch_id).order_by(items.c.idx)
                        )
                    ).all()
                )
        finally:
            await db.dispose()

    return asyncio.run(read())


def wait_until(what: str, check: Callable[[], bool], timeout_s: float = 120.0, every_s: float = 0.2) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"still waiting for: {what}")
        time.sleep(every_s)


def wait_for_batch_through_outages(client: Any, batch_id: str, timeout_s: float = 180.0) -> Any:
    """Like `wait_for_batch`, but a refused connection or a 5xx (a service being restarted)
    just means: ask again."""
    deadline = time.monotonic() + timeout_s
    batch = None
    while time.monotonic() < deadline:
        try:
            batch = client.batches.retrieve(batch_id)
        except (openai.APIConnectionError, openai.InternalServerError, openai.APITimeoutError):
            batch = None
        if batch is not None and batch.status in TERMINAL:
            return batch
        time.sleep(0.25)
    raise TimeoutError(f"batch {batch_id} not finished: {batch}")


def result_lines(client: Any, batch: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(output lines, error lines) of a finished batch."""
    output = read_jsonl(client.files.content(batch.output_file_id).content) if batch.output_file_id else []
    errors = read_jsonl(client.files.content(batch.error_file_id).content) if batch.error_file_id else []
    return output, errors


def finished_exactly_once(
    stack: RunningStack, batch_id: str, records: list[dict[str, Any]], timeout_s: float = 300.0
) -> tuple[Any, list[dict[str, Any]], list[dict[str, Any]]]:
    """Wait (through outages) for the batch to end; check that every record's custom_id is in
    its output or error file exactly once. Returns (batch, output lines, error lines)."""
    client = stack.client()
    done = wait_for_batch_through_outages(client, batch_id, timeout_s)
    output, errors = result_lines(client, done)
    assert_each_custom_id_once(output, errors, [r["custom_id"] for r in records])
    return done, output, errors


def assert_each_custom_id_once(
    output: list[dict[str, Any]], errors: list[dict[str, Any]], custom_ids: list[str]
) -> None:
    seen = Counter(line["custom_id"] for line in output + errors)
    repeated = {k: n for k, n in seen.items() if n > 1}
    assert not repeated, f"custom_ids written more than once: {list(repeated)[:10]}"
    assert set(seen) == set(custom_ids), f"missing: {sorted(set(custom_ids) - set(seen))[:10]}"
