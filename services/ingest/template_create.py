"""Creating a recurring batch template: `POST /v1/batches` with `cron`.

The request is checked as a create would check it (fields, webhook, input file), short of
reading the records: each run reads and checks them when it is created. Nothing but the
template row is stored; its first run is the expression's first time after now.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from batchgate.services.common import cron, errors
from batchgate.services.common.caller import Principal
from batchgate.services.common.db import Database
from batchgate.services.common.db.templates import NewTemplate, insert_template, project_template
from batchgate.services.common.ids import new_id
from batchgate.services.ingest.batch_create import BatchCreator
from batchgate.services.ingest.template_views import template_as_batch
from batchgate.v1 import batches_pb2

TEMPLATE_ID_PREFIX = "btpl_"


class TemplateMaker:
    def __init__(self, db: Database, creator: BatchCreator, clock: Callable[[], float]) -> None:
        self._db = db
        self._creator = creator
        self._clock = clock

    async def create(
        self,
        caller: Principal,
        request: batches_pb2.CreateBatchRequest,
        has_inline: bool,
        idempotency_key: str | None,
    ) -> batches_pb2.Batch:
        """Store the template; 400 naming the problem when the request could not make runs."""
        if idempotency_key is not None:
            raise errors.invalid(
                "Idempotency-Key is not supported with 'cron': a template is one object, listed "
                "with GET /v1/batch_templates.",
                "invalid_idempotency_key",
                "Idempotency-Key",
            )
        if request.dry_run:
            raise errors.invalid(
                "'dry_run' cannot be combined with 'cron': dry-run the same request without 'cron' "
                "to check and estimate one run.",
                "invalid_value",
                "dry_run",
            )
        if not request.HasField("cron"):
            raise errors.invalid(
                "'cron_timezone' is the time zone of 'cron': give 'cron' with it.",
                "missing_parameter",
                "cron",
            )
        expression = cron.check_expression(request.cron)
        zone = cron.check_timezone(request.cron_timezone)
        if has_inline or not request.input_file_id:
            raise errors.invalid(
                "A recurring batch reads its records from 'input_file_id'; inline 'requests' "
                "cannot be scheduled.",
                "missing_input",
                "input_file_id",
            )
        await self._creator.check_template(caller, request)
        stored = batches_pb2.CreateBatchRequest()
        stored.CopyFrom(request)
        for name in ("cron", "cron_timezone", "http_body", "requests"):
            stored.ClearField(name)
        now = self._clock()
        template = NewTemplate(
            id=new_id(TEMPLATE_ID_PREFIX),
            project_id=caller.project_id,
            api_key_id=caller.key_id,
            cron=expression,
            cron_timezone=zone,
            next_run_at=cron.next_time(expression, zone, now),
            created_at=time.time(),
            input_file_id=request.input_file_id,
            endpoint=request.endpoint,
            create_request=stored.SerializeToString(deterministic=True),
        )
        async with self._db.write() as conn:
            await insert_template(conn, template)
            row = await project_template(conn, caller.project_id, template.id)
        assert row is not None
        return template_as_batch(row)
