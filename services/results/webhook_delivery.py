"""Sending queued webhook events: claim due deliveries, POST them signed, record every attempt.

Each results replica runs one `WebhookDeliverer`. A claim is one statement over due rows
(`FOR UPDATE SKIP LOCKED` on PostgreSQL, so replicas never take the same delivery): it bumps
`attempts` (the attempt's fencing token), moves `next_attempt_at` past the attempt's time
limit (a lease: if this replica dies, the delivery is due again later), and writes the
attempt's row. The outcome is stored only while that token is current. A non-2xx answer, a
timeout or a connection failure is retried with exponential backoff and jitter until
`webhook_max_attempts`; then the delivery is `failed`. Nothing here ever blocks finalizing:
the finalizer only inserts the event and wakes this loop. Signing: `webhook_events` (Standard
Webhooks).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from dataclasses import dataclass

import aiohttp

from batchgate.services.common.config import Settings
from batchgate.services.common.db import Database, projects, webhooks
from batchgate.services.common.guarded_resolver import GuardedResolver
from batchgate.services.common.states import DeliveryStatus
from batchgate.services.common.waits import sleep_unless
from batchgate.services.common.webhook_urls import (
    RefusedUrl,
    allowed_addresses,
    webhook_networks,
)
from batchgate.services.results.webhook_events import signed_headers

log = logging.getLogger(__name__)

CLAIM_SLACK_S = 30.0  # beyond the attempt's time limit before another replica may retry it
ERROR_BODY_BYTES = 500  # of a failed answer's body, kept in the attempt's error
USER_AGENT = "batchgate-webhooks/1"


@dataclass(frozen=True)
class Claim:
    delivery_id: int
    event_id: str
    url: str
    payload: bytes
    attempt: int
    secret: str


def retry_delay_s(settings: Settings, attempt: int) -> float:
    """Wait after failed attempt number `attempt` (1-based): doubling, capped, with jitter."""
    base = min(settings.webhook_retry_initial_s * 2 ** (attempt - 1), settings.webhook_retry_max_s)
    return float(base * (0.5 + random.random() / 2))


class WebhookDeliverer:
    def __init__(self, settings: Settings, db: Database) -> None:
        self._settings = settings
        self._db = db
        self._allowed = webhook_networks(settings)
        self._wake = asyncio.Event()
        self._in_flight: set[asyncio.Task[None]] = set()

    def wake(self) -> None:
        """Look for due deliveries now (a batch just ended)."""
        self._wake.set()

    async def claim(self, limit: int) -> list[Claim]:
        """Take up to `limit` due deliveries for one attempt each."""
        now = time.time()
        async with self._db.read() as conn:  # idle polls stay reads: SQLite has one writer
            if not await webhooks.any_due(conn, now):
                return []
        async with self._db.write() as conn:
            rows = await webhooks.claim_due(
                self._db,
                conn,
                limit=limit,
                max_attempts=self._settings.webhook_max_attempts,
                claim_until=now + self._settings.webhook_timeout_s + CLAIM_SLACK_S,
                now=now,
            )
            if not rows:
                return []
            secrets = await projects.webhook_secrets(conn, {r.project_id for r in rows})
        return [
            Claim(r.id, r.event_id, r.url, r.payload.encode(), r.attempts, secrets.get(r.project_id, ""))
            for r in rows
        ]

    async def send(self, session: aiohttp.ClientSession, claim: Claim) -> tuple[int | None, str | None]:
        """POST one claimed event; returns (HTTP status or None, error or None when delivered)."""
        try:
            headers = signed_headers(claim.secret, claim.event_id, claim.payload, int(time.time()))
        except ValueError:  # binascii.Error: a secret from before Standard Webhooks signing
            return None, "the project's webhook secret is not a whsec_ base64 key: rotate it"
        try:
            await allowed_addresses(claim.url, self._allowed)
            async with session.post(
                claim.url, data=claim.payload, headers=headers, allow_redirects=False
            ) as response:
                if 200 <= response.status < 300:
                    return response.status, None
                excerpt = (await response.content.read(ERROR_BODY_BYTES)).decode("utf-8", "replace")
                return response.status, f"HTTP {response.status}: {excerpt}".strip()
        except RefusedUrl as exc:
            return None, f"refused: {exc}"[:ERROR_BODY_BYTES]
        except ValueError as exc:  # a URL the HTTP client cannot use (stored before it was refused)
            return None, f"unusable URL: {exc}"[:ERROR_BODY_BYTES]
        except TimeoutError:
            return None, f"no answer within {self._settings.webhook_timeout_s:g} s"
        except aiohttp.ClientError as exc:
            return None, f"connection failed: {exc}"[:ERROR_BODY_BYTES]

    async def record(self, claim: Claim, status_code: int | None, error: str | None) -> None:
        """Store the attempt's outcome; the delivery's only while this attempt is its current one."""
        now = time.time()
        if error is None:
            outcome = {"status": DeliveryStatus.DELIVERED, "delivered_at": now, "next_attempt_at": None}
        elif claim.attempt >= self._settings.webhook_max_attempts:
            outcome = {"status": DeliveryStatus.FAILED, "next_attempt_at": None}
        else:
            outcome = {"next_attempt_at": now + retry_delay_s(self._settings, claim.attempt)}
        async with self._db.write() as conn:
            await webhooks.finish_attempt(
                conn,
                delivery_id=claim.delivery_id,
                attempt=claim.attempt,
                status_code=status_code,
                error=error,
                outcome=outcome,
                now=now,
            )
        if error is not None:
            log.warning("webhook %s attempt %d failed: %s", claim.event_id, claim.attempt, error)

    async def _attempt(self, session: aiohttp.ClientSession, claim: Claim) -> None:
        try:
            status_code, error = await self.send(session, claim)
            await self.record(claim, status_code, error)
        except Exception:
            log.exception("webhook %s attempt %d: outcome not stored", claim.event_id, claim.attempt)
        finally:
            self._wake.set()  # a slot is free

    def session(self) -> aiohttp.ClientSession:
        connector = aiohttp.TCPConnector(
            resolver=GuardedResolver(self._allowed), limit=self._settings.webhook_concurrency
        )
        return aiohttp.ClientSession(
            connector=connector,
            timeout=aiohttp.ClientTimeout(total=self._settings.webhook_timeout_s),
            headers={"user-agent": USER_AGENT},
        )

    async def run(self) -> None:
        """Deliver until cancelled; polls every `maintenance_interval_s` besides wake-ups."""
        async with self.session() as session:
            try:
                while True:
                    self._wake.clear()
                    free = self._settings.webhook_concurrency - len(self._in_flight)
                    try:
                        claims = await self.claim(free) if free > 0 else []
                    except Exception:
                        log.exception("claiming webhook deliveries failed")
                        claims = []
                    for claim in claims:
                        task = asyncio.create_task(self._attempt(session, claim))
                        self._in_flight.add(task)
                        task.add_done_callback(self._in_flight.discard)
                    if len(claims) < max(free, 1):  # nothing more is due, or no slot is free
                        await sleep_unless(self._wake, self._settings.maintenance_interval_s)
            finally:
                for task in self._in_flight:
                    task.cancel()
                await asyncio.gather(*self._in_flight, return_exceptions=True)
