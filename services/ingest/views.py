"""Database rows → public API messages (the OpenAI object shapes)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from batchgate.services.common import proto_values as pv
from batchgate.services.common.db import AnyRow, Connection, batches
from batchgate.services.ingest.throughput import Paces
from batchgate.v1 import batches_pb2, files_pb2


def file_message(row: AnyRow) -> files_pb2.File:
    return files_pb2.File(
        id=row.id,
        object="file",
        bytes=int(row.bytes),
        created_at=int(row.created_at),
        filename=row.filename,
        purpose=row.purpose,
        status=row.status,
        expires_at=pv.number_or_null(row.expires_at),
        status_details=pv.null(),
    )


def _priority(row: AnyRow) -> Any:
    if row.priority_spelling:
        return orjson.loads(row.priority_spelling)
    return "expedited" if row.priority_tier else "standard"


def _request_counts(row: AnyRow) -> batches_pb2.RequestCounts:
    """The stored counts, plus (for a native batch) what its provider reports done and not yet
    imported, so progress moves while the provider runs it."""
    completed = min(row.completed_count + row.native_completed, row.total)
    failed = min(row.failed_count + row.native_failed, row.total - completed)
    return batches_pb2.RequestCounts(total=row.total, completed=completed, failed=failed)


async def batch_messages(conn: Connection, rows: Sequence[AnyRow], paces: Paces) -> list[batches_pb2.Batch]:
    """The batches `rows` as messages, each with its retries (one query for all) and, while it
    runs, its throughput (from the rows themselves)."""
    return batch_views(rows, await batches.retries_of(conn, [row.id for row in rows]), paces)


def batch_views(
    rows: Sequence[AnyRow], retries: Mapping[str, Sequence[str]], paces: Paces
) -> list[batches_pb2.Batch]:
    """The batches `rows` as messages, with their `retries` by id and their throughput."""
    throughputs = paces.of(rows)
    return [batch_message(row, retries.get(row.id, ()), throughputs.get(row.id)) for row in rows]


def batch_message(
    row: AnyRow, retries: Sequence[str] = (), throughput: dict[str, Any] | None = None
) -> batches_pb2.Batch:
    """A batches row as the public Batch; `retries`: the batches that retried it;
    `throughput`: its pace while it runs."""
    errors_list = orjson.loads(row.errors) if row.errors else None
    return batches_pb2.Batch(
        id=row.id,
        object="batch",
        endpoint=row.endpoint,
        input_file_id=row.input_file_id,
        completion_window=row.completion_window,
        status=row.status,
        output_file_id=pv.string_or_null(row.output_file_id),
        error_file_id=pv.string_or_null(row.error_file_id),
        created_at=int(row.created_at),
        in_progress_at=pv.number_or_null(row.in_progress_at),
        expires_at=pv.number_or_null(row.expires_at),
        finalizing_at=pv.number_or_null(row.finalizing_at),
        completed_at=pv.number_or_null(row.completed_at),
        failed_at=pv.number_or_null(row.failed_at),
        expired_at=pv.number_or_null(row.expired_at),
        cancelling_at=pv.number_or_null(row.cancelling_at),
        cancelled_at=pv.number_or_null(row.cancelled_at),
        request_counts=_request_counts(row),
        metadata=pv.from_python(orjson.loads(row.metadata) if row.metadata else None),
        errors=pv.from_python({"object": "list", "data": errors_list} if errors_list else None),
        model=pv.string_or_null(row.model),
        usage=batches_pb2.BatchUsage(
            input_tokens=row.input_tokens,
            input_tokens_details=batches_pb2.InputTokensDetails(cached_tokens=row.cached_tokens),
            output_tokens=row.output_tokens,
            output_tokens_details=batches_pb2.OutputTokensDetails(reasoning_tokens=row.reasoning_tokens),
            total_tokens=row.input_tokens + row.output_tokens,
        ),
        priority=pv.from_python(_priority(row)),
        rejected_count=row.rejected_count,
        rejected_records_file_id=pv.string_or_null(row.rejected_file_id),
        webhook_url=pv.string_or_null(row.webhook_url),
        cost=batches_pb2.BatchCost(currency="usd", amount=row.cost_usd, discount=row.discount),
        template_id=pv.string_or_null(row.template_id),
        next_run_at=pv.null(),
        cron=pv.null(),
        cron_timezone=pv.null(),
        retry_of=pv.string_or_null(row.retry_of),
        name=pv.string_or_null(row.name),
        throughput=pv.from_python(throughput),
        retries=retries,
        execution=row.execution,
    )
