"""Failures without an HTTP answer (timeouts, unreachable upstreams, cancel, expiry) are error
file lines with `response: null`, and cancelled/expired batches tell their webhook.

A private stack: a 1 s request time limit, two retries, an upstream nobody listens on, and an
executor that runs two items at a time (so a cancel or an expiry finds queued items).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from openai.types import BatchError
from sqlalchemy import update

from batchgate.services.common.db import Database
from batchgate.services.common.db.schema import batches
from tests.support import (
    RunningStack,
    chat_records,
    free_port,
    fresh_database,
    read_jsonl,
    running_stack,
    upload,
    wait_for_batch,
)
from tests.webhook_receiver import WebhookReceiver

CONFIG = """
providers:
  - {{name: simulated, kind: openai, base_url: "http://127.0.0.1:{simulator}/v1", api_keys: [sim]}}
  - {{name: unreachable, kind: openai, base_url: "http://127.0.0.1:{nobody}/v1"}}
models:
  - {{name: gpt-4o-mini, provider: simulated, price: {{input_per_mtok: 0.15, output_per_mtok: 0.6}}}}
  - {{name: offline-model, provider: unreachable}}
retry: {{initial_interval_s: 0.05, max_interval_s: 0.1, max_attempts: 2}}
"""


@pytest.fixture(scope="module")
def stack(db_kind: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    tmp: Path = tmp_path_factory.mktemp(f"error-shapes-{db_kind}")
    simulator = free_port()
    config = tmp / "batchgate.yaml"
    config.write_text(CONFIG.format(simulator=simulator, nobody=free_port()))
    with (
        fresh_database(db_kind, tmp) as url,
        running_stack(
            tmp,
            url,
            BATCHGATE_CONFIG=str(config),
            BATCHGATE_SIMULATOR_PORT=str(simulator),
            BATCHGATE_REQUEST_TIMEOUT_S="1",
            BATCHGATE_EXECUTOR_CONCURRENCY="2",
            BATCHGATE_MAINTENANCE_INTERVAL_S="0.5",
        ) as running,
    ):
        yield running


@pytest.fixture(scope="module")
def receiver() -> Iterator[WebhookReceiver]:
    with WebhookReceiver() as running:
        yield running


def create(client: Any, records: list[dict[str, Any]], **extra: Any) -> Any:
    return client.batches.create(
        input_file_id=upload(client, records).id,
        endpoint="/v1/chat/completions",
        completion_window="24h",
        **extra,
    )


def error_lines(client: Any, batch: Any) -> list[dict[str, Any]]:
    return read_jsonl(client.files.content(batch.error_file_id).content)


def wait_until_some_finished(client: Any, batch_id: str) -> None:
    deadline = time.monotonic() + 60
    while client.batches.retrieve(batch_id).request_counts.completed < 1:
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_timeouts_are_error_objects_next_to_the_successes(stack: RunningStack) -> None:
    client = stack.client()
    ok = chat_records(2, prefix="shape-ok")
    slow = chat_records(1, prefix="shape-slow", x_sim={"delay_ms": 3000})
    batch = wait_for_batch(client, create(client, [ok[0], slow[0], ok[1]]).id)
    assert batch.status == "completed"
    assert [x["custom_id"] for x in read_jsonl(client.files.content(batch.output_file_id).content)] == [
        "shape-ok-0",
        "shape-ok-1",
    ]
    (line,) = error_lines(client, batch)
    assert line["custom_id"] == "shape-slow-0" and line["response"] is None
    error = BatchError.model_validate(line["error"])
    assert error.code == "request_timeout" and error.message


def test_an_unreachable_upstream_gives_connection_errors(stack: RunningStack) -> None:
    client = stack.client()
    batch = wait_for_batch(
        client, create(client, chat_records(2, model="offline-model", prefix="shape-down")).id
    )
    assert batch.status == "completed" and batch.output_file_id is None
    lines = error_lines(client, batch)
    assert [x["custom_id"] for x in lines] == ["shape-down-0", "shape-down-1"]
    for line in lines:
        assert line["response"] is None
        assert BatchError.model_validate(line["error"]).code == "connection_error"


def _expire_now(stack: RunningStack, client: Any, batch_id: str) -> None:
    """The completion window passes (a test cannot wait 24 h): move its end into the past."""

    async def run() -> None:
        db = Database(stack.database_url)
        try:
            async with db.write() as conn:
                await conn.execute(
                    update(batches).where(batches.c.id == batch_id).values(expires_at=time.time() - 1)
                )
        finally:
            await db.dispose()

    asyncio.run(run())


def _cancel(_stack: RunningStack, client: Any, batch_id: str) -> None:
    assert client.batches.cancel(batch_id).status in ("cancelling", "cancelled")


ENDINGS = {"cancelled": _cancel, "expired": _expire_now}


@pytest.mark.parametrize("end", sorted(ENDINGS))
def test_cancel_and_expiry_keep_finished_results_and_tell_the_webhook(
    stack: RunningStack, receiver: WebhookReceiver, end: str
) -> None:
    client = stack.client()
    records = chat_records(10, prefix=f"shape-{end}", x_sim={"delay_ms": 700})
    path = receiver.fresh_path(end)
    batch = create(client, records, extra_body={"webhook_url": receiver.url(path)})
    wait_until_some_finished(client, batch.id)
    ENDINGS[end](stack, client, batch.id)
    done = wait_for_batch(client, batch.id)

    assert done.status == end and getattr(done, f"{end}_at") and done.completed_at is None
    finished = read_jsonl(client.files.content(done.output_file_id).content)
    closed = error_lines(client, done)
    assert len(finished) == done.request_counts.completed >= 1  # paid-for results are kept
    assert len(closed) == done.request_counts.failed >= 1
    assert sorted(x["custom_id"] for x in finished + closed) == sorted(r["custom_id"] for r in records)
    for line in closed:
        assert line["response"] is None
        error = BatchError.model_validate(line["error"])
        assert error.code == f"batch_{end}" and error.message

    (call,) = receiver.wait_for(path, 1)
    event = orjson.loads(call.body)  # OpenAI's event: it names the batch, which holds the rest
    assert (event["type"], event["object"], event["data"]) == (f"batch.{end}", "event", {"id": batch.id})
    assert event["created_at"] >= getattr(done, f"{end}_at")
