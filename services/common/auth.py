"""API keys: creation, hashing and verification into the caller's `Principal`.

Keys look like `bg-<40 url-safe chars>`; only their SHA-256 is stored. Every key belongs to
a project, and a project sees only its own files and batches. Both `Authorization: Bearer`
(OpenAI SDK) and `x-api-key` (Anthropic style) are accepted.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import time
from dataclasses import dataclass

from batchgate.services.common import errors
from batchgate.services.common.access_policy import ALL_SCOPES, Policy, Scope, parse_scopes, scopes_text
from batchgate.services.common.caller import Principal
from batchgate.services.common.db import AnyRow, Database, projects
from batchgate.services.common.ids import api_key_id, project_id

KEY_PREFIX = "bg-"
DEFAULT_PROJECT_NAME = "default"


def hash_key(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


@dataclass(frozen=True)
class CreatedKey:
    key_id: str
    project_id: str
    secret: str  # shown once; only its hash is stored


def new_webhook_secret() -> str:
    """A Standard Webhooks signing secret: `whsec_` + the base64 of 32 random bytes (the form
    `openai`'s `webhooks.unwrap` and the `standardwebhooks` library decode)."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


async def ensure_project(db: Database, name: str = DEFAULT_PROJECT_NAME) -> str:
    """The id of the project called `name`, created if missing."""
    async with db.write() as conn:
        existing = await projects.id_by_name(conn, name)
        if existing:
            return existing
        new = project_id()
        await projects.insert_project(conn, project_id=new, name=name, webhook_secret=new_webhook_secret())
        return new


async def webhook_secret(db: Database, project_name: str, rotate: bool = False) -> str | None:
    """The key that signs the webhooks of the project called `project_name` (None: no such
    project); `rotate` replaces it first."""
    async with db.write() as conn:
        return await projects.webhook_secret(conn, project_name, new_webhook_secret() if rotate else None)


async def create_key(
    db: Database,
    project: str,
    name: str = "default",
    budget_usd: float | None = None,
    *,
    policy: Policy | None = None,
    scopes: frozenset[Scope] = ALL_SCOPES,
    expires_at: float | None = None,
) -> CreatedKey:
    """A new key of `project`: all scopes and no policy of its own unless given."""
    secret = KEY_PREFIX + secrets.token_urlsafe(30)
    key = CreatedKey(key_id=api_key_id(), project_id=project, secret=secret)
    async with db.write() as conn:
        await projects.insert_key(
            conn,
            key_id=key.key_id,
            project_id=project,
            name=name,
            key_hash=hash_key(secret),
            key_prefix=secret[:9],
            budget_usd=budget_usd,
            policy=policy.to_json() if policy is not None else None,
            scopes=None if scopes == ALL_SCOPES else scopes_text(scopes),
            expires_at=expires_at,
        )
    return key


async def find_project(db: Database, name: str) -> str | None:
    """The id of the project called `name` (or whose id is `name`), if any."""
    async with db.read() as conn:
        return await projects.find(conn, name)


async def set_key_budget(db: Database, key_id: str, budget_usd: float | None) -> bool:
    """Set or (None) remove a key's spend cap; whether the key exists."""
    async with db.write() as conn:
        return await projects.set_key_budget(conn, key_id, budget_usd)


async def set_project_budget(db: Database, project: str, budget_usd: float | None) -> bool:
    """Set or (None) remove a project's spend cap; whether the project exists."""
    async with db.write() as conn:
        return await projects.set_project_budget(conn, project, budget_usd)


async def revoke_key(db: Database, key_id: str) -> bool:
    async with db.write() as conn:
        return await projects.revoke_key(conn, key_id)


def principal_of(row: AnyRow) -> Principal:
    """The caller a key row stands for (`projects.key_owner` / `key_by_id` columns): its
    project, scopes and policies."""
    return Principal(
        project_id=row.project_id,
        key_id=row.id,
        scopes=parse_scopes(row.scopes),
        project_policy=Policy.from_json(row.project_policy),
        key_policy=Policy.from_json(row.key_policy),
    )


class KeyVerifier:
    """Verifies keys against the database, caching answers for `cache_s` seconds.

    A revoked key therefore works for up to `cache_s` more seconds in a process that has
    just verified it; `batchgate keys revoke` waits that long before it returns.
    """

    def __init__(self, db: Database, cache_s: float) -> None:
        self._db = db
        self._cache_s = cache_s
        self._cache: dict[str, tuple[Principal | None, float]] = {}

    async def verify(self, secret: str | None) -> Principal:
        if not secret:
            raise errors.unauthenticated(
                "You didn't provide an API key. Send it as 'Authorization: Bearer <key>' "
                "(or as 'x-api-key: <key>', as the Anthropic SDK does)."
            )
        digest = hash_key(secret)
        now = time.monotonic()
        cached = self._cache.get(digest)
        if cached is None or cached[1] < now:
            async with self._db.read() as conn:
                row = await projects.key_owner(conn, digest, time.time())
            found = None
            expiry = now + self._cache_s
            if row is not None:
                found = principal_of(row)
                if row.expires_at is not None:  # an expiring key is not cached past its expiry
                    expiry = min(expiry, now + row.expires_at - time.time())
            if len(self._cache) > 10_000:
                self._cache.clear()
            cached = (found, expiry)
            self._cache[digest] = cached
        if cached[0] is None:
            raise errors.unauthenticated()
        return cached[0]
