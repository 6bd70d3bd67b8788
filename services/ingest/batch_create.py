"""Creating a batch: read the input once, check every record, store items in chunks.

A create never leaves anything half-written visible, nor anything behind when it fails:
1. The request is checked (the caller's policy included), the Idempotency-Key claimed (a
   repeat answers with the first batch) and the budgets checked, before anything is stored.
2. One transaction locks the input file (so it cannot be deleted meanwhile) and inserts
   the batch as `validating`, which no reader shows.
3. Inline requests are written to a blob; the input is streamed once and each record
   checked; items (accepted and rejected) are inserted in chunks of short transactions (one
   large create never holds the SQLite writer for seconds), rejections streamed to a blob.
4. One transaction publishes it all: the budget hold and concurrency limit (`budget_holds`),
   the inline input file, the rejections file, `validating → in_progress`, and the
   Idempotency-Key's batch.
A failure removes the batch, its items and its unpublished blobs; a crash leaves a `validating`
batch and incomplete blobs, for `sweep_stale_creates` and `reclaim_abandoned`. Rejected records
are items in state `rejected`, so the error file lists them in input order with the rest.

This module is the orchestration and the writing; the request's checks are `create_checks`,
reading and checking the records `create_records`, the clean-up `sweeps`.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, NoReturn, Protocol

import orjson

from batchgate.internal.v1 import spend_pb2_grpc
from batchgate.services.common import errors, telemetry
from batchgate.services.common.access_policy import allowed_models_json, require_expedited
from batchgate.services.common.caller import Principal
from batchgate.services.common.config import Settings
from batchgate.services.common.db import AnyRow, Connection, Database, batches, files, items
from batchgate.services.common.db.blobs import BlobWriter
from batchgate.services.common.faults import crash_point
from batchgate.services.common.ids import file_id as new_file_id
from batchgate.services.common.states import BatchStatus, FilePurpose
from batchgate.services.common.webhook_urls import check_webhook_url
from batchgate.services.ingest.batch_shape import BatchShape, openai_shape
from batchgate.services.ingest.budget_holds import admit
from batchgate.services.ingest.budgets import check_budgets
from batchgate.services.ingest.create_checks import (
    CreateOptions,
    batch_execution,
    check_request,
    check_source,
    request_options,
)
from batchgate.services.ingest.create_records import (
    Checked,
    Rejection,
    Rejections,
    check_records,
    error_preview,
    inline_line,
    store_inline,
)
from batchgate.services.ingest.idempotency import Claim, IdempotencyKeys, request_hash
from batchgate.services.ingest.lookup import visible_batch, visible_file
from batchgate.services.ingest.metrics import IngestMetrics
from batchgate.services.ingest.simple_form import apply_defaults
from batchgate.services.ingest.sweeps import discard_batch
from batchgate.v1 import batches_pb2

log = logging.getLogger(__name__)


@dataclass
class CreateResult:
    batch: AnyRow
    rejections: list[Rejection] = field(default_factory=list)
    """The first rejections (at most `rejected_preview_max`); the file has every one."""
    replayed: bool = False
    """An Idempotency-Key repeat: the batch an earlier identical create made."""
    rejected_codes: Counter[str] = field(default_factory=Counter)
    """How many records were rejected with each code (a new batch's, not a replay's)."""


class RunClaim(Protocol):
    """A create that is the run of a recurring template (services.ingest.template_runs)."""

    template_id: str

    async def claim(self, conn: Connection) -> None:
        """In the transaction that publishes the run: take the template's due time, or raise
        (another replica made this run) so that the run is discarded."""


@dataclass(frozen=True, kw_only=True)
class RetryLineage:
    """What a retry's batch records of its source (`services.ingest.retry`)."""

    retry_of: str
    selection: str
    """`<only or all>:<model or nothing>`: one retry batch per source and selection."""


@dataclass(frozen=True)
class _Draft:
    """A batch being created: still `validating`, invisible."""

    caller: Principal
    batch: str
    input_file: str
    source_blob: str | None
    """The uploaded input's blob; None for inline requests (stored during the create)."""
    run_of: RunClaim | None = None


class BatchCreator:
    def __init__(
        self,
        settings: Settings,
        db: Database,
        spend: spend_pb2_grpc.SpendServiceStub,
        idempotency: IdempotencyKeys,
        metrics: IngestMetrics | None = None,
        shape: BatchShape | None = None,
    ) -> None:
        """`shape`: which API's batches this creator makes (OpenAI's by default)."""
        self._settings = settings
        self._shape = shape or openai_shape(settings, inline_line)
        self._db = db
        self._spend = spend
        self._idempotency = idempotency
        self._metrics = metrics or IngestMetrics()

    async def create(
        self,
        caller: Principal,
        request: batches_pb2.CreateBatchRequest,
        inline: list[Any],
        idempotency_key: str | None = None,
        run_of: RunClaim | None = None,
        lineage: RetryLineage | None = None,
    ) -> CreateResult:
        """Create a batch from `request`, whose inline records (if any) come as `inline`:
        decoded JSON values, not the request's `requests` field. `run_of`: the batch is a run
        of that template. A retry passes its `lineage` (its records are inline but as large as
        a file may be)."""
        started = time.monotonic()
        apply_defaults(request)
        check_request(self._shape, request, inline)
        await check_webhook_url(request.webhook_url, self._settings)
        options = request_options(request)
        if options.tier:
            require_expedited(caller.policy)
        claim: Claim | None = None
        if idempotency_key is not None:
            asked = request_hash(request, inline)
            claimed = await self._idempotency.claim(caller.project_id, idempotency_key, asked)
            if isinstance(claimed, str):
                return await self._replay(caller.project_id, claimed)
            claim = claimed
        try:
            await check_budgets(self._db, self._spend, caller)
            draft = await self._open(caller, request, options, run_of, lineage)
            try:
                result = await self._fill(draft, request, inline, options, claim, lineage)
            except BaseException:
                await discard_batch(self._db, draft.batch)
                raise
        except BaseException:
            if claim is not None:
                await self._idempotency.release(claim)
            raise
        batch = result.batch
        accepted = batch.total - batch.rejected_count
        log.info(
            "batch %s created: %d records, %d rejected",
            batch.id,
            batch.total,
            batch.rejected_count,
            extra={"batch_id": batch.id},
        )
        self._metrics.created(
            request.endpoint,
            "expedited" if options.tier else "standard",
            accepted,
            result.rejected_codes,
            time.monotonic() - started,
        )
        return result

    @property
    def spend(self) -> spend_pb2_grpc.SpendServiceStub:
        """The results service's spend answers, for budget checks."""
        return self._spend

    async def _replay(self, project_id: str, batch: str) -> CreateResult:
        """The answer of the create that made `batch`, as the batch stands now."""
        async with self._db.read() as conn:
            row = await visible_batch(conn, project_id, batch, message_batch=self._shape.message_batch)
            rejected = await items.rejected(conn, batch, self._settings.rejected_preview_max)
        preview = [Rejection(r.line, r.custom_id, r.error_code, r.error_message) for r in rejected]
        return CreateResult(row, preview, replayed=True)

    async def check_template(self, caller: Principal, request: batches_pb2.CreateBatchRequest) -> None:
        """Check a recurring template's request as a create would, short of reading the
        records (each run does): the fields, the webhook, and the input file."""
        check_request(self._shape, request, [])
        await check_webhook_url(request.webhook_url, self._settings)
        request_options(request)
        await self.check_input_file(caller, request.input_file_id)

    async def check_input_file(self, caller: Principal, file_id: str) -> None:
        """404 unless `file_id` is the caller's; 400 unless it is an input a batch may read."""
        async with self._db.read() as conn:
            check_source(
                self._settings, await visible_file(conn, caller.project_id, file_id, param="input_file_id")
            )

    async def _open(
        self,
        caller: Principal,
        request: batches_pb2.CreateBatchRequest,
        options: CreateOptions,
        run_of: RunClaim | None,
        lineage: RetryLineage | None,
    ) -> _Draft:
        """Insert the batch as `validating`, its input file locked meanwhile (step 2)."""
        now = time.time()
        async with self._db.write() as conn:
            if request.input_file_id:
                source = await visible_file(
                    conn, caller.project_id, request.input_file_id, lock_in=self._db, param="input_file_id"
                )
                check_source(self._settings, source)
                draft = _Draft(caller, self._shape.new_id(), source.id, source.blob_id, run_of)
            else:
                draft = _Draft(caller, self._shape.new_id(), new_file_id(), None, run_of)
            await batches.insert_validating(
                conn,
                id=draft.batch,
                project_id=caller.project_id,
                api_key_id=caller.key_id,
                endpoint=request.endpoint,
                input_file_id=draft.input_file,
                completion_window=request.completion_window,
                created_at=now,
                expires_at=now + options.window_s,
                metadata=orjson.dumps(dict(request.metadata)).decode() if request.metadata else None,
                priority_tier=options.tier,
                priority=options.priority,
                priority_spelling=options.priority_spelling,
                discount=self._settings.batch_discount(options.tier),
                webhook_url=request.webhook_url or None,
                output_expires_after_s=options.output_expiry_s,
                traceparent=telemetry.current_traceparent() or None,
                template_id=run_of.template_id if run_of else None,
                allowed_models=allowed_models_json(caller.policy),
                name=request.name or None,
                retry_of=lineage.retry_of if lineage else None,
                retry_selection=lineage.selection if lineage else None,
            )
        return draft

    async def _fill(
        self,
        draft: _Draft,
        request: batches_pb2.CreateBatchRequest,
        inline_requests: list[Any],
        options: CreateOptions,
        claim: Claim | None,
        lineage: RetryLineage | None,
    ) -> CreateResult:
        """Check every record and store the items (step 3), then publish it all (step 4)."""
        owner = f"create:{draft.batch}"
        inline = None
        if draft.source_blob is None:
            limit = None if lineage is None else self._settings.max_file_bytes
            inline = await store_inline(
                self._db, self._shape, owner, inline_requests, request.endpoint, request.model, limit
            )
        rejections = Rejections(BlobWriter(self._db, owner), self._settings.rejected_preview_max)
        blob = inline.blob_id if inline is not None else draft.source_blob
        assert blob is not None
        param = "requests" if inline is not None else "input_file_id"
        checked = await check_records(
            *(self._db, self._shape, draft.batch, request.endpoint, blob, rejections, param),
            request.model,
            caller=draft.caller,
            discount=self._settings.batch_discount(options.tier),
        )
        if checked.accepted == 0:
            await self._refuse(draft.caller.project_id, checked, rejections, param)
        execution = batch_execution(
            self._settings,
            request.execution,
            checked.model,
            self._settings.batch_discount(options.tier),
            message_batch=self._shape.message_batch,
            mixed=checked.mixed_models,
            loops=checked.loops,
        )
        project = draft.caller.project_id
        crash_point("ingest.create.before_publish")
        async with self._db.write() as conn:
            await admit(self._db, conn, draft.caller, checked.hold_usd)
            if inline is not None:
                await self._publish(
                    conn,
                    inline,
                    draft.input_file,
                    project,
                    "inline-requests.jsonl",
                    FilePurpose.BATCH,
                    checked.total,
                )
            rejected_file = None
            if rejections.count:
                rejected_file = new_file_id()
                await self._publish(
                    conn,
                    rejections.writer,
                    rejected_file,
                    project,
                    f"{draft.batch}_rejected_records.jsonl",
                    FilePurpose.BATCH_OUTPUT,
                    rejections.count,
                    batch_id=draft.batch,
                    lifetime_s=options.output_expiry_s,
                )
            moved = await batches.transition(
                conn,
                draft.batch,
                BatchStatus.IN_PROGRESS,
                total=checked.total,
                rejected_count=rejections.count,
                failed_count=rejections.count,
                model=checked.model,
                rejected_file_id=rejected_file,
                execution=execution.mode,
                discount=execution.discount,
                hold_usd=checked.hold_usd,
            )
            if not moved:
                raise errors.ApiError(500, "The batch changed while it was being created.", "server_error")
            if claim is not None:
                await claim.bind(conn, draft.batch)
            if draft.run_of is not None:
                await draft.run_of.claim(conn)
            row = await batches.get(conn, draft.batch)
        return CreateResult(row, rejections.preview, rejected_codes=rejections.codes)

    async def _refuse(
        self, project_id: str, checked: Checked, rejections: Rejections, param: str
    ) -> NoReturn:
        """400 `no_valid_records`: no batch, but the rejections file for the full list."""
        rejected_file = new_file_id()
        async with self._db.write() as conn:
            await self._publish(
                conn,
                rejections.writer,
                rejected_file,
                project_id,
                "rejected_records.jsonl",
                FilePurpose.BATCH_OUTPUT,
                rejections.count,
            )
        raise errors.invalid(
            f"None of the {checked.total} records can run; see 'rejected_records'.",
            "no_valid_records",
            param,
            rejected_count=rejections.count,
            rejected_records=error_preview(rejections.preview),
            rejected_records_file_id=rejected_file,
        )

    async def _publish(
        self,
        conn: Connection,
        writer: BlobWriter,
        ident: str,
        project_id: str,
        filename: str,
        purpose: FilePurpose,
        line_count: int,
        batch_id: str | None = None,
        lifetime_s: int | None = None,
    ) -> None:
        """Complete `writer`'s blob and make it the file `ident`, in the caller's transaction."""
        now = time.time()
        await files.insert_file(
            conn,
            file_id=ident,
            project_id=project_id,
            filename=filename,
            purpose=purpose,
            blob_id=await writer.finish(conn),
            size=writer.size,
            line_count=line_count,
            created_at=now,
            expires_at=now + (lifetime_s or self._settings.file_expiry_days * 86400),
            batch_id=batch_id,
        )
