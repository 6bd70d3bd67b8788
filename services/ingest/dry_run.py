"""A dry run: `"dry_run": true` on POST /v1/batches checks everything a create would and
answers the would-be batch with an `estimate`, storing and counting nothing.

The same checks run in the same order as `BatchCreator.create`: the request's fields and
defaults, the webhook URL, the options, the budgets (402 when used up), the input file
(visible, purpose, size) or the inline requests' size, then every record with the create's own
`RecordScreen` (limits per record and per batch, one model, duplicate custom_ids, the tool and
workflow URLs' address policy, 409 `feature_disabled`, the guardrails), then the execution
(`native`: 400 `native_unsupported` as a create, the estimate at the provider's batch discount;
nothing is sent to the provider). No batch,
item, blob or file row is written, no Idempotency-Key is claimed or bound (a dry run is
repeatable, so a key on it is ignored) and no usage is recorded; rejections come back in the
answer only (`rejected_records_file_id` is null). When no record can run, the answer is the
same 400 `no_valid_records` a create gives, and when it has no records (only blank lines)
the create's 400 `empty_file`. The caller's policy applies as on a create
(allowed models, record limit, expedited, guardrails), and `estimate.hold_verdict` says whether
the create's budget hold would be admitted now (no hold is placed).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import orjson

from batchgate.internal.v1 import spend_pb2_grpc
from batchgate.services.common import errors
from batchgate.services.common import proto_values as pv
from batchgate.services.common.access_policy import require_expedited
from batchgate.services.common.caller import Principal
from batchgate.services.common.config import Settings
from batchgate.services.common.db import Database
from batchgate.services.common.db.blobs import read_lines
from batchgate.services.common.webhook_urls import check_webhook_url
from batchgate.services.ingest.batch_shape import BatchShape, openai_shape
from batchgate.services.ingest.budget_holds import HoldTally, verdict
from batchgate.services.ingest.budgets import check_budgets
from batchgate.services.ingest.create_checks import (
    batch_execution,
    check_request,
    check_source,
    request_options,
)
from batchgate.services.ingest.create_records import (
    RecordScreen,
    Rejection,
    RejectionTally,
    error_preview,
    inline_line,
    inline_lines,
)
from batchgate.services.ingest.estimate import Estimate
from batchgate.services.ingest.guardrails import guardrails
from batchgate.services.ingest.lookup import visible_file
from batchgate.services.ingest.simple_form import apply_defaults
from batchgate.services.ingest.validation import Accepted
from batchgate.v1 import batches_pb2


async def _inline_lines(
    shape: BatchShape, request: batches_pb2.CreateBatchRequest, inline: list[Any]
) -> AsyncIterator[bytes]:
    for line in inline_lines(shape, inline, request.endpoint, request.model):
        yield line


def _priority(spelling: str | None, tier: int) -> Any:
    """The priority as the batch would read it back (`views` does the same from its row)."""
    if spelling:
        return orjson.loads(spelling)
    return "expedited" if tier else "standard"


class DryRun:
    def __init__(self, settings: Settings, db: Database, spend: spend_pb2_grpc.SpendServiceStub) -> None:
        self._settings = settings
        self._db = db
        self._spend = spend

    async def answer(
        self, caller: Principal, request: batches_pb2.CreateBatchRequest, inline: list[Any]
    ) -> batches_pb2.Batch:
        """The would-be batch of `request`, with its estimate; raises what a create would."""
        apply_defaults(request)
        shape = openai_shape(self._settings, inline_line)
        check_request(shape, request, inline)
        await check_webhook_url(request.webhook_url, self._settings)
        options = request_options(request)
        if options.tier:
            require_expedited(caller.policy)
        await check_budgets(self._db, self._spend, caller)
        if request.input_file_id:
            async with self._db.read() as conn:
                source = await visible_file(
                    conn, caller.project_id, request.input_file_id, param="input_file_id"
                )
            check_source(self._settings, source)
            lines, param = read_lines(self._db, source.blob_id), "input_file_id"
        else:
            lines, param = _inline_lines(shape, request, inline), "requests"
        estimate = Estimate(self._settings, request.endpoint)
        holds = HoldTally(self._settings, self._settings.batch_discount(options.tier))
        rejections = RejectionTally(self._settings.rejected_preview_max)
        async with guardrails(caller.project_policy.guardrails, self._settings) as guard:
            screen = RecordScreen.start(shape, request.endpoint, request.model, caller.policy, guard, param)
            total = await _check_all(screen, lines, estimate=estimate, holds=holds, rejections=rejections)
        preview = rejections.preview
        if total == 0:  # only blank lines: what the create's `check_records` answers
            raise errors.invalid("The input has no records.", "empty_file", param)
        if rejections.count == total:
            raise errors.invalid(
                f"None of the {total} records can run; see 'rejected_records'.",
                "no_valid_records",
                param,
                rejected_count=rejections.count,
                rejected_records=error_preview(preview),
                rejected_records_file_id=None,
            )
        execution = batch_execution(
            self._settings,
            request.execution,
            screen.checker.model,
            self._settings.batch_discount(options.tier),
            mixed=screen.mixed_models,
            loops=screen.loops,
        )
        net = 1.0 - execution.discount
        async with self._db.read() as conn:
            refused = await verdict(conn, caller, holds.usd)
        now = time.time()
        return batches_pb2.Batch(
            object="batch",
            endpoint=request.endpoint,
            input_file_id=request.input_file_id,
            completion_window=request.completion_window,
            status="validating",
            created_at=int(now),
            output_file_id=pv.null(),
            error_file_id=pv.null(),
            in_progress_at=pv.null(),
            completed_at=pv.null(),
            rejected_records_file_id=pv.null(),
            expires_at=pv.number_or_null(now + options.window_s),
            request_counts=batches_pb2.RequestCounts(total=total, failed=rejections.count),
            metadata=pv.from_python(dict(request.metadata) or None),
            model=pv.string_or_null(screen.checker.model),
            priority=pv.from_python(_priority(options.priority_spelling, options.tier)),
            rejected_count=rejections.count,
            rejected_records=[r.message_proto() for r in preview],
            webhook_url=pv.string_or_null(request.webhook_url or None),
            name=pv.string_or_null(request.name or None),
            dry_run=True,
            execution=execution.mode,
            estimate=batches_pb2.BatchEstimate(
                input_tokens=estimate.input_tokens,
                max_output_tokens=estimate.max_output_tokens,
                cost_min=estimate.gross_min * net,
                cost_max=estimate.gross_max * net,
                currency="usd",
                tokenizer=estimate.tokenizer,
                hold_usd=round(holds.usd, 6),
                hold_verdict=refused.code or "refused" if refused is not None else "fits",
                hold_message=refused.message if refused is not None else "",
            ),
        )


async def _check_all(
    screen: RecordScreen,
    lines: AsyncIterator[bytes],
    *,
    estimate: Estimate,
    holds: HoldTally,
    rejections: RejectionTally,
) -> int:
    """Check every record as a create does (`RecordScreen`, shared with it), adding the
    accepted ones to `estimate` and `holds`: how many there were."""
    total = 0
    async for line_number, outcome in screen.each(lines):
        total += 1
        if isinstance(outcome, Accepted):
            estimate.add(outcome)
            holds.add(outcome)
        else:
            await rejections.add(Rejection(line_number, outcome.custom_id, outcome.code, outcome.message))
    return total
