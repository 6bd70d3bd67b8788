"""The `projects` and `api_keys` tables (one aggregate: a project and its keys): the only
place their SQL lives.

Who may call what: the operator commands (`batchgate keys|projects|webhooks`, through
`batchgate.services.common.auth`) create and edit projects and keys; every service that serves the
public API verifies keys (`key_owner`); ingest reads budgets before a create and locks them
while it places a budget hold; results reads the projects' webhook secrets to sign deliveries;
the scheduler finds the running batches of revoked or expired keys to stop them.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from sqlalchemy import Select, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from batchgate.services.common.db.dialect import lock_rows
from batchgate.services.common.db.engine import AnyRow, Database
from batchgate.services.common.db.schema import api_keys, batches, items, projects
from batchgate.services.common.states import BATCH_RUNNING, ITEM_OPEN


async def id_by_name(conn: AsyncConnection, name: str) -> str | None:
    """operator: the id of the project called `name`."""
    return (await conn.execute(select(projects.c.id).where(projects.c.name == name))).scalar()


async def find(conn: AsyncConnection, name_or_id: str) -> str | None:
    """operator: the id of the project called `name_or_id`, or whose id it is."""
    query = select(projects.c.id).where((projects.c.name == name_or_id) | (projects.c.id == name_or_id))
    return (await conn.execute(query)).scalar()


async def insert_project(conn: AsyncConnection, *, project_id: str, name: str, webhook_secret: str) -> None:
    """operator: a new project."""
    await conn.execute(
        insert(projects).values(
            id=project_id, name=name, created_at=time.time(), webhook_secret=webhook_secret
        )
    )


async def webhook_secret(
    conn: AsyncConnection, project_name: str, replace_with: str | None = None
) -> str | None:
    """operator: the webhook secret of the project called `project_name` (None: no such
    project), replaced by `replace_with` first when given."""
    if replace_with is not None:
        await conn.execute(
            update(projects).where(projects.c.name == project_name).values(webhook_secret=replace_with)
        )
    query = select(projects.c.webhook_secret).where(projects.c.name == project_name)
    return (await conn.execute(query)).scalar()


async def webhook_secrets(conn: AsyncConnection, project_ids: Iterable[str]) -> dict[str, str]:
    """results: the webhook secret of each of `project_ids`, by id."""
    query = select(projects.c.id, projects.c.webhook_secret).where(projects.c.id.in_(set(project_ids)))
    return {r.id: r.webhook_secret for r in (await conn.execute(query)).all()}


async def set_project_budget(conn: AsyncConnection, project_id: str, budget_usd: float | None) -> bool:
    """operator: set or (None) remove a project's spend cap; whether the project exists."""
    result = await conn.execute(
        update(projects).where(projects.c.id == project_id).values(budget_usd=budget_usd)
    )
    return result.rowcount == 1


async def all_projects(conn: AsyncConnection) -> list[AnyRow]:
    """operator, scheduler (retention): every project, oldest first."""
    return list((await conn.execute(select(projects).order_by(projects.c.created_at))).all())


async def insert_key(
    conn: AsyncConnection,
    *,
    key_id: str,
    project_id: str,
    name: str,
    key_hash: str,
    key_prefix: str,
    budget_usd: float | None,
    policy: str | None = None,
    scopes: str | None = None,
    expires_at: float | None = None,
) -> None:
    """operator: a new API key (only its hash is stored); `policy` (JSON) narrows its
    project's, `scopes` (None: all) and `expires_at` (None: never) as stored."""
    await conn.execute(
        insert(api_keys).values(
            id=key_id,
            project_id=project_id,
            name=name,
            key_hash=key_hash,
            key_prefix=key_prefix,
            created_at=time.time(),
            budget_usd=budget_usd,
            policy=policy,
            scopes=scopes,
            expires_at=expires_at,
        )
    )


async def set_key_budget(conn: AsyncConnection, key_id: str, budget_usd: float | None) -> bool:
    """operator: set or (None) remove a key's spend cap; whether the key exists."""
    result = await conn.execute(update(api_keys).where(api_keys.c.id == key_id).values(budget_usd=budget_usd))
    return result.rowcount == 1


async def revoke_key(conn: AsyncConnection, key_id: str) -> bool:
    """operator: revoke an active key; whether one was revoked."""
    result = await conn.execute(
        update(api_keys)
        .where(api_keys.c.id == key_id, api_keys.c.revoked_at.is_(None))
        .values(revoked_at=time.time())
    )
    return result.rowcount == 1


async def key_lapsed(conn: AsyncConnection, key_id: str, now: float) -> bool:
    """ingest (a recurring template's run, made as the key that created it): whether the key
    `key_id` was revoked or has expired at `now`."""
    query = select(api_keys.c.revoked_at, api_keys.c.expires_at).where(api_keys.c.id == key_id)
    row = (await conn.execute(query)).first()
    return row is None or row.revoked_at is not None or (row.expires_at is not None and row.expires_at <= now)


async def key_exists(conn: AsyncConnection, key_id: str) -> bool:
    """operator: whether the key `key_id` exists (revoked or not)."""
    return (await conn.execute(select(api_keys.c.id).where(api_keys.c.id == key_id))).first() is not None


async def keys(conn: AsyncConnection, project_id: str | None = None) -> list[AnyRow]:
    """operator: every key (of one project, when given) with its `project_name`, oldest first."""
    query = (
        select(api_keys, projects.c.name.label("project_name"))
        .join(projects, projects.c.id == api_keys.c.project_id)
        .order_by(api_keys.c.created_at)
    )
    if project_id is not None:
        query = query.where(api_keys.c.project_id == project_id)
    return list((await conn.execute(query)).all())


def _key_access_query() -> Select[Any]:
    return select(
        api_keys.c.id,
        api_keys.c.project_id,
        api_keys.c.scopes,
        api_keys.c.expires_at,
        api_keys.c.policy.label("key_policy"),
        projects.c.policy.label("project_policy"),
    ).select_from(api_keys.join(projects, projects.c.id == api_keys.c.project_id))


async def key_owner(conn: AsyncConnection, key_hash: str, now: float) -> AnyRow | None:
    """Every API-serving service: (id, project_id, scopes, key_policy, project_policy,
    expires_at) of the active (not revoked, not expired at `now`) key with this hash."""
    query = _key_access_query().where(
        api_keys.c.key_hash == key_hash,
        api_keys.c.revoked_at.is_(None),
        (api_keys.c.expires_at.is_(None)) | (api_keys.c.expires_at > now),
    )
    row: AnyRow | None = (await conn.execute(query)).first()
    return row


async def key_by_id(conn: AsyncConnection, key_id: str) -> AnyRow | None:
    """ingest (a recurring template's run, made as the key that created it): the same columns
    as `key_owner`, of the key `key_id`, so the run gets the key's scopes and policies."""
    row: AnyRow | None = (await conn.execute(_key_access_query().where(api_keys.c.id == key_id))).first()
    return row


async def set_project_policy(conn: AsyncConnection, project_id: str, policy: str | None) -> bool:
    """operator: replace a project's policy (JSON; None: no limits); whether it exists."""
    result = await conn.execute(update(projects).where(projects.c.id == project_id).values(policy=policy))
    return result.rowcount == 1


async def set_key_access(
    conn: AsyncConnection, key_id: str, *, policy: str | None, scopes: str | None, expires_at: float | None
) -> bool:
    """operator: replace a key's policy, scopes and expiry; whether the key exists."""
    result = await conn.execute(
        update(api_keys)
        .where(api_keys.c.id == key_id)
        .values(policy=policy, scopes=scopes, expires_at=expires_at)
    )
    return result.rowcount == 1


async def key_access(conn: AsyncConnection, key_id: str) -> AnyRow | None:
    """operator: (policy, scopes, expires_at) of a key, to change one of them."""
    query = select(api_keys.c.policy, api_keys.c.scopes, api_keys.c.expires_at)
    return (await conn.execute(query.where(api_keys.c.id == key_id))).first()


async def project_policy(conn: AsyncConnection, project_id: str) -> str | None:
    """operator (to change part of it), scheduler (rate shares, retention): a project's
    stored policy (JSON)."""
    query = select(projects.c.policy).where(projects.c.id == project_id)
    return (await conn.execute(query)).scalar()


async def lock_budgets(db: Database, conn: AsyncConnection, key_id: str) -> AnyRow | None:
    """ingest: (key_budget, project_budget) of a key and its project, both rows locked until
    the transaction ends (PostgreSQL; SQLite has one writer), so that creates of one project
    place their budget holds one at a time."""
    row: AnyRow | None = (await conn.execute(lock_rows(db, _budgets_query(key_id)))).first()
    return row


async def budgets(conn: AsyncConnection, key_id: str) -> AnyRow | None:
    """ingest: (key_budget, project_budget) of a key and its project."""
    row: AnyRow | None = (await conn.execute(_budgets_query(key_id))).first()
    return row


def _budgets_query(key_id: str) -> Select[Any]:
    return (
        select(api_keys.c.budget_usd.label("key_budget"), projects.c.budget_usd.label("project_budget"))
        .select_from(api_keys.join(projects, projects.c.id == api_keys.c.project_id))
        .where(api_keys.c.id == key_id)
    )


async def running_batches_of_lapsed_keys(conn: AsyncConnection, now: float) -> list[str]:
    """scheduler: running batches (in progress or cancelling) with open items whose API key has
    been revoked or has expired by `now`: their remaining items must stop."""
    lapsed = api_keys.c.revoked_at.is_not(None) | (api_keys.c.expires_at <= now)
    has_open = (
        select(items.c.idx).where(items.c.batch_id == batches.c.id, items.c.state.in_(ITEM_OPEN)).exists()
    )
    query = (
        select(batches.c.id)
        .select_from(batches.join(api_keys, api_keys.c.id == batches.c.api_key_id))
        .where(batches.c.status.in_(BATCH_RUNNING), lapsed, has_open)
    )
    return list((await conn.execute(query)).scalars().all())
