"""`Idempotency-Key` for batch creates: one key, one batch, per project, for a day.

The key arrives as gRPC metadata `idempotency-key` (Envoy passes the HTTP header through).
"The same body" means the same `CreateBatchRequest` fields (hashed by their deterministic
serialization) and the same inline requests (hashed as JSON with sorted keys): JSON that
differs only in key order or whitespace is the same request. Inline requests are kept as
sent, so `1` and `1.0` in them differ, as they would upstream.

A create claims its key (a row whose `batch_id` is null) before it stores anything, binds
the key to its batch in the transaction that makes the batch visible, and releases the key
when it fails, so a failed create never poisons it. A second create with the same key waits
for the first and answers with its batch (or takes the key over when the first failed).
A claim older than `stale_s` belongs to a create that crashed and is taken over.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import orjson
from google.protobuf.message import Message

from batchgate.services.common import errors
from batchgate.services.common.db import Connection, Database, IntegrityError, idempotency_keys
from batchgate.services.ingest.grpc_records import json_default

METADATA_KEY = "idempotency-key"
REPLAYED_HEADER = "idempotent-replayed"  # "true" on an answer that repeats an earlier create's batch
MAX_KEY_BYTES = 512
POLL_S = 0.05
WAIT_S = 240.0  # below Envoy's 300 s limit for unary calls


def key_from_metadata(metadata: Iterable[tuple[str, str | bytes]]) -> str | None:
    """The request's Idempotency-Key (1–512 bytes), None when absent; 400 when malformed."""
    for name, value in metadata:
        if name != METADATA_KEY:
            continue
        key = value.decode("latin-1") if isinstance(value, bytes) else value
        if not 1 <= len(key.encode()) <= MAX_KEY_BYTES:
            raise errors.invalid(
                f"The Idempotency-Key header must be 1 to {MAX_KEY_BYTES} bytes long.",
                "invalid_idempotency_key",
                "Idempotency-Key",
            )
        return key
    return None


def request_hash(request: Message, inline: list[Any]) -> str:
    """`request`'s fields (its `requests` left empty) and its inline records, as one digest."""
    digest = hashlib.sha256(request.SerializeToString(deterministic=True))
    digest.update(b"\n")
    digest.update(orjson.dumps(inline, option=orjson.OPT_SORT_KEYS, default=json_default))
    return digest.hexdigest()


@dataclass(frozen=True)
class Claim:
    """A key this create holds until it binds it to its batch or releases it."""

    project_id: str
    key: str

    async def bind(self, conn: Connection, batch_id: str) -> None:
        """Point the key at `batch_id`, in the transaction that publishes the batch."""
        await idempotency_keys.bind(conn, self.project_id, self.key, batch_id)


class IdempotencyKeys:
    def __init__(self, db: Database, ttl_s: float, stale_s: float) -> None:
        self._db = db
        self._ttl_s = ttl_s
        self._stale_s = stale_s

    async def claim(self, project_id: str, key: str, digest: str, wait_s: float = WAIT_S) -> Claim | str:
        """A new claim on `key`, or the id of the batch an earlier identical create made.

        422 when the key was used with a different request; 409 (nothing stored) when the
        first create with it is still running after `wait_s`.
        """
        deadline = time.monotonic() + wait_s
        while True:
            try:
                outcome = await self._try_claim(project_id, key, digest)
            except IntegrityError:
                outcome = None  # a concurrent create inserted the same key first: look again
            if outcome is not None:
                return outcome
            if time.monotonic() > deadline:
                raise errors.conflict(
                    "Another request with this Idempotency-Key is still being processed; retry later.",
                    "idempotency_key_in_use",
                )
            await asyncio.sleep(POLL_S)

    async def _try_claim(self, project_id: str, key: str, digest: str) -> Claim | str | None:
        now = time.time()
        async with self._db.write() as conn:
            row = await idempotency_keys.lock(self._db, conn, project_id, key)
            if row is not None and not self._lapsed(row.created_at, row.batch_id, now):
                if row.request_hash != digest:
                    raise errors.ApiError(
                        422,
                        "This Idempotency-Key was already used with a different request body.",
                        "idempotency_key_reused",
                        "Idempotency-Key",
                    )
                return None if row.batch_id is None else str(row.batch_id)  # None: the first still runs
            await idempotency_keys.claim(
                conn, project_id=project_id, key=key, request_hash=digest, now=now, replace=row is not None
            )
        return Claim(project_id, key)

    def _lapsed(self, created_at: float, batch_id: str | None, now: float) -> bool:
        """Past its lifetime, or a claim whose create crashed."""
        return created_at <= now - self._ttl_s or (batch_id is None and created_at <= now - self._stale_s)

    async def release(self, claim: Claim) -> None:
        """Free the key of a create that failed (no-op once it is bound to a batch)."""
        async with self._db.write() as conn:
            await idempotency_keys.release(conn, claim.project_id, claim.key)

    async def sweep(self) -> int:
        """Delete keys past their lifetime and claims of crashed creates."""
        now = time.time()
        async with self._db.write() as conn:
            return await idempotency_keys.sweep(
                conn, expired_before=now - self._ttl_s, stale_before=now - self._stale_s
            )
