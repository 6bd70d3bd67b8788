"""Every statement on `batch_templates`, the recurring batch templates (owned by ingest).

Ingest creates, reads, pauses, resumes, reschedules and deletes templates, and spawns their
runs; the scheduler only reads which templates are due (`due_templates`) and, for retention,
which files a template reads (`reads_file`). Each function's docstring names the service that
may call it.

Claiming a due time: `claim_due_time` moves `next_run_at` on only if it still holds the due
time the caller served. It runs in the transaction that publishes the run (or records why
there is none), so two replicas serving one due time publish one run: the second one's
update matches no row (PostgreSQL re-checks the condition after waiting for the first's row
lock; SQLite has one writer) and its run is discarded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson
from sqlalchemy import Row, delete, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from batchgate.services.common.db.schema import batch_templates
from batchgate.services.common.states import PauseReason, TemplateStatus


@dataclass(frozen=True, kw_only=True)
class NewTemplate:
    id: str
    project_id: str
    api_key_id: str
    cron: str
    cron_timezone: str
    next_run_at: float
    created_at: float
    input_file_id: str
    endpoint: str
    create_request: bytes


@dataclass(frozen=True, kw_only=True)
class DueTime:
    """A template whose run is due, and the due time the caller serves."""

    template_id: str
    due_at: float


async def insert_template(conn: AsyncConnection, template: NewTemplate) -> None:
    """Ingest: store a new, scheduled template."""
    await conn.execute(
        insert(batch_templates).values(
            id=template.id,
            project_id=template.project_id,
            api_key_id=template.api_key_id,
            status=TemplateStatus.SCHEDULED,
            cron=template.cron,
            cron_timezone=template.cron_timezone,
            next_run_at=template.next_run_at,
            created_at=template.created_at,
            input_file_id=template.input_file_id,
            endpoint=template.endpoint,
            create_request=template.create_request,
        )
    )


async def project_template(conn: AsyncConnection, project_id: str, template_id: str) -> Row[Any] | None:
    """Ingest: the project's template `template_id`, if it has one."""
    query = select(batch_templates).where(
        batch_templates.c.id == template_id, batch_templates.c.project_id == project_id
    )
    return (await conn.execute(query)).first()


async def template_by_id(conn: AsyncConnection, template_id: str) -> Row[Any] | None:
    """Ingest (spawning a run): the template, whatever its project."""
    return (await conn.execute(select(batch_templates).where(batch_templates.c.id == template_id))).first()


async def list_templates(
    conn: AsyncConnection, project_id: str, after: str | None, limit: int
) -> list[Row[Any]]:
    """Ingest: up to `limit` of the project's templates older than `after`, newest first."""
    query = select(batch_templates).where(batch_templates.c.project_id == project_id)
    if after:
        query = query.where(batch_templates.c.id < after)
    return list((await conn.execute(query.order_by(batch_templates.c.id.desc()).limit(limit))).all())


async def due_templates(conn: AsyncConnection, now: float, limit: int) -> list[DueTime]:
    """Scheduler: scheduled templates whose next run is due at `now`, most overdue first."""
    query = (
        select(batch_templates.c.id, batch_templates.c.next_run_at)
        .where(
            batch_templates.c.status == TemplateStatus.SCHEDULED,
            batch_templates.c.next_run_at <= now,
        )
        .order_by(batch_templates.c.next_run_at)
        .limit(limit)
    )
    rows = (await conn.execute(query)).all()
    return [DueTime(template_id=r.id, due_at=r.next_run_at) for r in rows]


async def claim_due_time(
    conn: AsyncConnection,
    template_id: str,
    due_at: float,
    next_run_at: float,
    *,
    error: dict[str, str] | None = None,
    pause: PauseReason | None = None,
) -> bool:
    """Ingest: serve the due time `due_at` (moving `next_run_at` on, recording a refused
    run's `error`, pausing with `pause`) if no one else served it; whether this call did."""
    values: dict[str, Any] = {
        "next_run_at": None if pause else next_run_at,
        "last_run_at": due_at,
        "last_error": orjson.dumps(error).decode() if error else None,
    }
    if pause:
        values.update(status=TemplateStatus.PAUSED, paused_reason=pause)
    result = await conn.execute(
        update(batch_templates)
        .where(
            batch_templates.c.id == template_id,
            batch_templates.c.status == TemplateStatus.SCHEDULED,
            batch_templates.c.next_run_at == due_at,
        )
        .values(**values)
    )
    return bool(result.rowcount == 1)


def expired_input(file_id: str) -> str:
    """The message of a template paused because its input file expired (at a due run, or as
    the file is swept)."""
    return f"The input file {file_id} has expired."


async def reads_file(conn: AsyncConnection, file_id: str) -> bool:
    """Scheduler (retention): whether a template, scheduled or paused, reads `file_id` as its
    input: purging a run must not take the file its later runs read."""
    query = select(batch_templates.c.id).where(batch_templates.c.input_file_id == file_id)
    return (await conn.execute(query.limit(1))).first() is not None


async def pause_reading(conn: AsyncConnection, file_id: str, reason: PauseReason, message: str) -> None:
    """Ingest: pause the scheduled templates whose runs read `file_id` for `reason`, which a
    sweep of the file is about to erase: once its row is gone, a due run tells an expired file
    from a deleted one no more (every expired input read `input_file_deleted`)."""
    error = orjson.dumps({"code": reason, "message": message}).decode()
    await conn.execute(
        update(batch_templates)
        .where(
            batch_templates.c.input_file_id == file_id, batch_templates.c.status == TemplateStatus.SCHEDULED
        )
        .values(status=TemplateStatus.PAUSED, paused_reason=reason, next_run_at=None, last_error=error)
    )


async def pause_template(conn: AsyncConnection, template_id: str) -> None:
    """Ingest: the user pauses the template (a paused one keeps its reason)."""
    await conn.execute(
        update(batch_templates)
        .where(batch_templates.c.id == template_id, batch_templates.c.status == TemplateStatus.SCHEDULED)
        .values(status=TemplateStatus.PAUSED, paused_reason=PauseReason.BY_USER, next_run_at=None)
    )


async def resume_template(conn: AsyncConnection, template_id: str, next_run_at: float) -> None:
    """Ingest: schedule a paused template again, from `next_run_at`."""
    await conn.execute(
        update(batch_templates)
        .where(batch_templates.c.id == template_id, batch_templates.c.status == TemplateStatus.PAUSED)
        .values(status=TemplateStatus.SCHEDULED, paused_reason=None, next_run_at=next_run_at)
    )


@dataclass(frozen=True, kw_only=True)
class TemplateChange:
    """What an update sets: the expression, the input of future runs, and (for a scheduled
    template) its next run."""

    cron: str
    cron_timezone: str
    input_file_id: str
    create_request: bytes
    next_run_at: float | None


async def change_template(conn: AsyncConnection, template_id: str, change: TemplateChange) -> None:
    """Ingest: apply an update (a paused template stays paused)."""
    values: dict[str, Any] = {
        "cron": change.cron,
        "cron_timezone": change.cron_timezone,
        "input_file_id": change.input_file_id,
        "create_request": change.create_request,
    }
    if change.next_run_at is not None:
        values["next_run_at"] = change.next_run_at
    await conn.execute(update(batch_templates).where(batch_templates.c.id == template_id).values(**values))


async def delete_template(conn: AsyncConnection, template_id: str) -> None:
    """Ingest: remove the template; its runs stay (their `template_id` names it still)."""
    await conn.execute(delete(batch_templates).where(batch_templates.c.id == template_id))
