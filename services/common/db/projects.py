"""The `projects` and `api_keys` tables (one aggregate: a project and its keys): the only
place their SQL lives.

Who may call what: the operator commands (`batchgate keys|projects|webhooks`, through
`batchgate.services.common.auth`) create and edit projects and keys; every service that serves the
public API verifies keys (`key_owner`); ingest reads budgets before a create; results reads
the projects' webhook secrets to sign deliveries.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from sqlalchemy import insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from batchgate.services.common.db.engine import AnyRow
from batchgate.services.common.db.schema import api_keys, projects


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
    """operator: every project, oldest first."""
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
) -> None:
    """operator: a new API key (only its hash is stored)."""
    await conn.execute(
        insert(api_keys).values(
            id=key_id,
            project_id=project_id,
            name=name,
            key_hash=key_hash,
            key_prefix=key_prefix,
            created_at=time.time(),
            budget_usd=budget_usd,
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


async def key_revoked(conn: AsyncConnection, key_id: str) -> bool:
    """ingest (a recurring template's run, made as the key that created it): whether the key
    `key_id` was revoked."""
    revoked_at = (await conn.execute(select(api_keys.c.revoked_at).where(api_keys.c.id == key_id))).scalar()
    return revoked_at is not None


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


async def key_owner(conn: AsyncConnection, key_hash: str) -> AnyRow | None:
    """Every API-serving service: (id, project_id) of the active key with this hash."""
    query = select(api_keys.c.id, api_keys.c.project_id).where(
        api_keys.c.key_hash == key_hash, api_keys.c.revoked_at.is_(None)
    )
    return (await conn.execute(query)).first()


async def budgets(conn: AsyncConnection, key_id: str) -> AnyRow | None:
    """ingest: (key_budget, project_budget) of a key and its project."""
    query = (
        select(api_keys.c.budget_usd.label("key_budget"), projects.c.budget_usd.label("project_budget"))
        .select_from(api_keys.join(projects, projects.c.id == api_keys.c.project_id))
        .where(api_keys.c.id == key_id)
    )
    return (await conn.execute(query)).first()
