"""BatchTemplateService: list, get, reschedule, pause, resume and delete recurring templates.

A template belongs to a project like a batch: another project's template reads as 404.
Resuming, and changing the expression of a scheduled template, set the next run to the
expression's first time after now: times missed while paused are not made up.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import grpc

from batchgate.services.common import cron, errors, paging, rest_input
from batchgate.services.common import proto_values as pv
from batchgate.services.common.caller import principal
from batchgate.services.common.db import AnyRow, Connection, Database, batches
from batchgate.services.common.db import templates as store
from batchgate.services.common.ids import plausible_id
from batchgate.services.common.states import TemplateStatus
from batchgate.services.ingest.batch_create import BatchCreator
from batchgate.services.ingest.template_create import TEMPLATE_ID_PREFIX
from batchgate.services.ingest.template_views import TEMPLATE_OBJECT, stored_request, template_message
from batchgate.v1 import templates_pb2, templates_pb2_grpc

RECENT_RUNS = 10  # runs shown by GET /v1/batch_templates/{id}


async def _visible(conn: Connection, template_id: str) -> AnyRow:
    """The caller's template, or 404 (unknown or another project's)."""
    row = None
    if plausible_id(template_id):
        row = await store.project_template(conn, principal().project_id, template_id)
    if row is None:
        raise errors.not_found("batch template", template_id[:80], "template_id")
    return row


class TemplatesServicer(templates_pb2_grpc.BatchTemplateServiceServicer):
    def __init__(self, db: Database, creator: BatchCreator, clock: Callable[[], float]) -> None:
        self._db = db
        self._creator = creator
        self._clock = clock

    async def ListBatchTemplates(
        self, request: templates_pb2.ListBatchTemplatesRequest, context: grpc.aio.ServicerContext
    ) -> templates_pb2.ListBatchTemplatesResponse:
        limit = paging.page_limit(request, default=20, maximum=100)
        async with self._db.read() as conn:
            if request.after:
                paging.cursor_id("batch template", TEMPLATE_ID_PREFIX, request.after)
            rows = await store.list_templates(conn, principal().project_id, request.after, limit + 1)
        page = [template_message(r) for r in rows[:limit]]
        return templates_pb2.ListBatchTemplatesResponse(
            object="list",
            data=page,
            has_more=len(rows) > limit,
            first_id=pv.string_or_null(page[0].id if page else None),
            last_id=pv.string_or_null(page[-1].id if page else None),
        )

    async def GetBatchTemplate(
        self, request: templates_pb2.GetBatchTemplateRequest, context: grpc.aio.ServicerContext
    ) -> templates_pb2.BatchTemplate:
        async with self._db.read() as conn:
            row = await _visible(conn, request.template_id)
            runs = await batches.runs_of_template(conn, row.project_id, row.id, RECENT_RUNS)
        return template_message(row, runs)

    async def UpdateBatchTemplate(
        self, request: templates_pb2.UpdateBatchTemplateRequest, context: grpc.aio.ServicerContext
    ) -> templates_pb2.BatchTemplate:
        """A new expression or zone reschedules a scheduled template from now; a new input
        file is checked as at create and read by the runs to come."""
        request, _ = rest_input.decode_body(request)
        if not (request.cron or request.cron_timezone or request.input_file_id):
            raise errors.invalid(
                "Give 'cron', 'cron_timezone' or 'input_file_id'.", "missing_parameter", "cron"
            )
        expression = cron.check_expression(request.cron) if request.cron else None
        zone = cron.check_timezone(request.cron_timezone) if request.cron_timezone else None
        if request.input_file_id:
            await self._creator.check_input_file(principal(), request.input_file_id)
        async with self._db.write() as conn:
            row = await _visible(conn, request.template_id)
            stored = stored_request(row)
            stored.input_file_id = request.input_file_id or stored.input_file_id
            change = store.TemplateChange(
                cron=expression or row.cron,
                cron_timezone=zone or row.cron_timezone,
                input_file_id=stored.input_file_id,
                create_request=stored.SerializeToString(deterministic=True),
                next_run_at=None,
            )
            if row.status == TemplateStatus.SCHEDULED and (expression or zone):
                next_run = cron.next_time(change.cron, change.cron_timezone, self._clock())
                change = dataclasses.replace(change, next_run_at=next_run)
            await store.change_template(conn, row.id, change)
            return template_message(await _visible(conn, row.id))

    async def PauseBatchTemplate(
        self, request: templates_pb2.PauseBatchTemplateRequest, context: grpc.aio.ServicerContext
    ) -> templates_pb2.BatchTemplate:
        """Pausing a paused template answers it unchanged (keeping the reason it paused for)."""
        request, _ = rest_input.decode_body(request)
        async with self._db.write() as conn:
            row = await _visible(conn, request.template_id)
            await store.pause_template(conn, row.id)
            return template_message(await _visible(conn, row.id))

    async def ResumeBatchTemplate(
        self, request: templates_pb2.ResumeBatchTemplateRequest, context: grpc.aio.ServicerContext
    ) -> templates_pb2.BatchTemplate:
        """Resuming a scheduled template answers it unchanged."""
        request, _ = rest_input.decode_body(request)
        async with self._db.write() as conn:
            row = await _visible(conn, request.template_id)
            if row.status == TemplateStatus.PAUSED:
                await store.resume_template(
                    conn, row.id, cron.next_time(row.cron, row.cron_timezone, self._clock())
                )
            return template_message(await _visible(conn, row.id))

    async def DeleteBatchTemplate(
        self, request: templates_pb2.DeleteBatchTemplateRequest, context: grpc.aio.ServicerContext
    ) -> templates_pb2.DeleteBatchTemplateResponse:
        async with self._db.write() as conn:
            row = await _visible(conn, request.template_id)
            await store.delete_template(conn, row.id)
        return templates_pb2.DeleteBatchTemplateResponse(id=row.id, object=TEMPLATE_OBJECT, deleted=True)
