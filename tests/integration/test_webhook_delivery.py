"""Webhook delivery against a real database and a real loopback receiver: two replicas never
send one attempt twice, spent attempts end `failed`, and an attempt whose replica died is
retried once its claim lapses."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import orjson
from sqlalchemy import insert, select, update

from batchgate.services.common.config import Settings
from batchgate.services.common.db import Database
from batchgate.services.common.db.schema import projects, webhook_attempts, webhook_deliveries
from batchgate.services.common.ids import new_id
from batchgate.services.common.loading import load_settings
from batchgate.services.results.webhook_delivery import WebhookDeliverer
from tests.webhook_receiver import WebhookReceiver, readme_verifier


def settings(**overrides: str) -> Settings:
    return load_settings(
        environ={
            "BATCHGATE_WEBHOOK_ALLOWED_NETWORKS": "127.0.0.0/8",
            "BATCHGATE_WEBHOOK_CONCURRENCY": "8",
            "BATCHGATE_WEBHOOK_RETRY_INITIAL_S": "0.05",
            "BATCHGATE_MAINTENANCE_INTERVAL_S": "0.1",
            **overrides,
        }
    )


async def enqueue(db: Database, urls: list[str]) -> str:
    """Queue one event per URL (as finalize does); returns the project's secret."""
    now = time.time()
    async with db.write() as conn:
        project = (await conn.execute(select(projects.c.id, projects.c.webhook_secret))).one()
        await conn.execute(
            insert(webhook_deliveries),
            [
                {
                    "event_id": new_id("evt_"),
                    "batch_id": f"batch_{i}",
                    "project_id": project.id,
                    "url": url,
                    "event_type": "batch.completed",
                    "payload": orjson.dumps({"id": f"batch_{i}", "type": "batch.completed"}).decode(),
                    "status": "pending",
                    "created_at": now,
                    "next_attempt_at": now,
                }
                for i, url in enumerate(urls)
            ],
        )
    return str(project.webhook_secret)


async def deliveries(db: Database) -> list[Any]:
    async with db.read() as conn:
        return list((await conn.execute(select(webhook_deliveries).order_by(webhook_deliveries.c.id))).all())


async def attempts(db: Database) -> list[Any]:
    async with db.read() as conn:
        query = select(webhook_attempts).order_by(webhook_attempts.c.delivery_id, webhook_attempts.c.attempt)
        return list((await conn.execute(query)).all())


async def run_until(
    deliverers: list[WebhookDeliverer], db: Database, done: Any, timeout_s: float = 60
) -> None:
    tasks = [asyncio.create_task(d.run()) for d in deliverers]
    try:
        deadline = time.monotonic() + timeout_s
        while not done(await deliveries(db)):
            assert time.monotonic() < deadline, await deliveries(db)
            await asyncio.sleep(0.1)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def all_settled(rows: list[Any]) -> bool:
    return all(r.status != "pending" for r in rows)


async def test_two_replicas_send_each_event_once(db: Database, database_url: str) -> None:
    second = Database(database_url)  # another replica: its own connections
    try:
        with WebhookReceiver() as receiver:
            path = receiver.fresh_path("replicas")
            secret = await enqueue(db, [receiver.url(path)] * 40)
            await run_until(
                [WebhookDeliverer(settings(), db), WebhookDeliverer(settings(), second)], db, all_settled
            )
            calls = receiver.received(path)
        rows = await deliveries(db)
        assert [(r.status, r.attempts, r.last_status_code) for r in rows] == [("delivered", 1, 200)] * 40
        assert len(calls) == 40
        assert sorted(c.headers["webhook-id"] for c in calls) == sorted(r.event_id for r in rows)
        verify = readme_verifier()
        assert all(verify(secret, c.headers, c.body) for c in calls)
        assert [(a.attempt, a.status_code, a.error) for a in await attempts(db)] == [(1, 200, None)] * 40
    finally:
        await second.dispose()


async def test_spent_attempts_end_failed_with_every_attempt_recorded(db: Database) -> None:
    with WebhookReceiver() as receiver:
        path = receiver.fresh_path("down")
        receiver.script(path, 500, 500, 500)
        await enqueue(db, [receiver.url(path), "http://[::1]:9/not-allowed"])
        await run_until([WebhookDeliverer(settings(BATCHGATE_WEBHOOK_MAX_ATTEMPTS="2"), db)], db, all_settled)
        assert len(receiver.received(path)) == 2
    down, refused = await deliveries(db)
    assert (down.status, down.attempts, down.last_status_code, down.next_attempt_at) == (
        "failed",
        2,
        500,
        None,
    )
    assert (refused.status, refused.attempts, refused.last_status_code) == ("failed", 2, None)
    by_delivery = {r.id: [] for r in (down, refused)}
    for a in await attempts(db):
        by_delivery[a.delivery_id].append(a)
    assert [(a.attempt, a.status_code) for a in by_delivery[down.id]] == [(1, 500), (2, 500)]
    assert all(a.error.startswith("HTTP 500") and a.finished_at >= a.started_at for a in by_delivery[down.id])
    assert all(a.error.startswith("refused:") for a in by_delivery[refused.id])


async def test_an_attempt_whose_replica_died_is_retried_after_its_claim_lapses(db: Database) -> None:
    with WebhookReceiver() as receiver:
        path = receiver.fresh_path("orphan")
        await enqueue(db, [receiver.url(path)])
        (claim,) = await WebhookDeliverer(settings(), db).claim(5)  # this replica then dies
        assert claim.attempt == 1
        assert await WebhookDeliverer(settings(), db).claim(5) == []  # claimed: nobody else takes it
        async with db.write() as conn:  # time passes: the claim lapses
            await conn.execute(update(webhook_deliveries).values(next_attempt_at=time.time() - 1))
        await run_until([WebhookDeliverer(settings(), db)], db, all_settled)
        assert len(receiver.received(path)) == 1
    (row,) = await deliveries(db)
    assert (row.status, row.attempts) == ("delivered", 2)
    first, second = await attempts(db)
    assert (first.attempt, first.finished_at, first.status_code) == (1, None, None)  # outcome unknown
    assert (second.attempt, second.status_code) == (2, 200)


async def test_a_lapsed_last_attempt_ends_failed(db: Database) -> None:
    once = settings(BATCHGATE_WEBHOOK_MAX_ATTEMPTS="1")
    await enqueue(db, ["http://127.0.0.1:9/never-answered"])
    assert len(await WebhookDeliverer(once, db).claim(5)) == 1  # this replica then dies
    async with db.write() as conn:
        await conn.execute(update(webhook_deliveries).values(next_attempt_at=time.time() - 1))
    assert await WebhookDeliverer(once, db).claim(5) == []
    (row,) = await deliveries(db)
    assert (row.status, row.attempts, row.next_attempt_at) == ("failed", 1, None)


async def test_a_secret_from_before_standard_webhooks_is_an_attempt_error_naming_the_fix(
    db: Database,
) -> None:
    async with db.write() as conn:
        await conn.execute(update(projects).values(webhook_secret="whsec_a"))  # not base64
    with WebhookReceiver() as receiver:
        path = receiver.fresh_path("old-secret")
        await enqueue(db, [receiver.url(path)])
        await run_until([WebhookDeliverer(settings(BATCHGATE_WEBHOOK_MAX_ATTEMPTS="1"), db)], db, all_settled)
        assert receiver.received(path) == []  # nothing unsigned or wrongly signed goes out
    (row,) = await deliveries(db)
    assert row.status == "failed" and "rotate it" in row.last_error
