"""Recurring batch templates → public API messages.

A template is shown two ways: as a `BatchTemplate` by the template methods, and as a Batch
(`status: "scheduled"`) answering the `POST /v1/batches` that created it, so that SDK clients
read it with the type they asked for.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from batchgate.services.common import proto_values as pv
from batchgate.services.common.db import AnyRow
from batchgate.services.common.states import TemplateStatus
from batchgate.services.ingest.views import batch_message
from batchgate.v1 import batches_pb2, templates_pb2

TEMPLATE_OBJECT = "batch_template"


def stored_request(row: AnyRow) -> batches_pb2.CreateBatchRequest:
    """The create request every run of the template is made from."""
    request = batches_pb2.CreateBatchRequest()
    request.ParseFromString(row.create_request)
    return request


def _priority(request: batches_pb2.CreateBatchRequest) -> Any:
    given = pv.to_python(request.priority) if request.HasField("priority") else None
    return "standard" if given is None else given


def template_message(row: AnyRow, runs: Sequence[AnyRow] = ()) -> templates_pb2.BatchTemplate:
    request = stored_request(row)
    return templates_pb2.BatchTemplate(
        id=row.id,
        object=TEMPLATE_OBJECT,
        status=row.status,
        paused_reason=pv.string_or_null(row.paused_reason),
        cron=row.cron,
        cron_timezone=row.cron_timezone,
        next_run_at=pv.number_or_null(None if row.next_run_at is None else int(row.next_run_at)),
        created_at=int(row.created_at),
        input_file_id=row.input_file_id,
        endpoint=row.endpoint,
        completion_window=request.completion_window,
        metadata=pv.from_python(dict(request.metadata) or None),
        priority=pv.from_python(_priority(request)),
        webhook_url=pv.string_or_null(request.webhook_url or None),
        last_run_at=pv.number_or_null(None if row.last_run_at is None else int(row.last_run_at)),
        last_error=pv.from_python(orjson.loads(row.last_error) if row.last_error else None),
        recent_runs=[batch_message(run) for run in runs],
    )


def template_as_batch(row: AnyRow) -> batches_pb2.Batch:
    """The answer of the create that made the template: the batch fields every run will have.
    `execution` is the one the template asks for (every run asks for it); without one, and the
    discount always, it depends on the model of the records each run reads, so they stay empty."""
    request = stored_request(row)
    return batches_pb2.Batch(
        id=row.id,
        object=TEMPLATE_OBJECT,
        endpoint=row.endpoint,
        input_file_id=row.input_file_id,
        completion_window=request.completion_window,
        status=TemplateStatus.SCHEDULED,
        output_file_id=pv.null(),
        error_file_id=pv.null(),
        created_at=int(row.created_at),
        in_progress_at=pv.null(),
        expires_at=pv.null(),
        finalizing_at=pv.null(),
        completed_at=pv.null(),
        failed_at=pv.null(),
        expired_at=pv.null(),
        cancelling_at=pv.null(),
        cancelled_at=pv.null(),
        request_counts=batches_pb2.RequestCounts(),
        metadata=pv.from_python(dict(request.metadata) or None),
        errors=pv.null(),
        model=pv.null(),
        usage=batches_pb2.BatchUsage(
            input_tokens_details=batches_pb2.InputTokensDetails(),
            output_tokens_details=batches_pb2.OutputTokensDetails(),
        ),
        priority=pv.from_python(_priority(request)),
        rejected_records_file_id=pv.null(),
        webhook_url=pv.string_or_null(request.webhook_url or None),
        cost=batches_pb2.BatchCost(currency="usd"),
        template_id=pv.null(),
        next_run_at=pv.number_or_null(int(row.next_run_at)),
        cron=pv.string_or_null(row.cron),
        cron_timezone=pv.string_or_null(row.cron_timezone),
        execution=request.execution,
    )
