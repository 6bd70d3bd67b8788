"""Creating a batch: read the input once, check every record, store items in chunks.

A create never leaves anything half-written visible, nor anything behind when it fails:
1. The request is checked, the Idempotency-Key claimed (a repeat answers with the first
   batch) and the budgets checked, before anything is stored.
2. One transaction locks the input file (so it cannot be deleted meanwhile) and inserts
   the batch as `validating`, which no reader shows.
3. Inline requests are written to a blob; the input is streamed once and each record
   checked; items (accepted and rejected) are inserted in chunks of short transactions (one
   large create never holds the SQLite writer for seconds), rejections streamed to a blob.
4. One transaction publishes it all: the inline input file, the rejections file,
   `validating → in_progress`, and the Idempotency-Key's batch.
A failure removes the batch, its items and its unpublished blobs. A crash leaves a
`validating` batch and incomplete blobs, which `sweep_stale_creates` and
`reclaim_abandoned` remove. Rejected records are stored as items in state `rejected`, so
the error file lists them in input order with the rest.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, NoReturn, Protocol

import orjson
from sqlalchemy import Row, delete, insert, select
from sqlalchemy.ext.asyncio import AsyncConnection

from batchgate.internal.v1 import spend_pb2_grpc
from batchgate.v1 import batches_pb2
from services.common import batch_status, errors, telemetry
from services.common import proto_values as pv
from services.common.auth import Principal
from services.common.config import SUPPORTED_ENDPOINTS, Settings
from services.common.db import Database
from services.common.db.schema import batches, files, items
from services.common.faults import crash_point
from services.common.ids import batch_id as new_batch_id
from services.common.ids import file_id as new_file_id
from services.common.jsonl import dumps_line, one_line
from services.common.storage import BlobWriter, read_lines, reclaim_owned
from services.common.webhook_urls import check_webhook_url
from services.ingest.budgets import check_budgets
from services.ingest.idempotency import Claim, IdempotencyKeys, request_hash
from services.ingest.item_writer import ItemWriter, item_row
from services.ingest.lookup import visible_batch, visible_file
from services.ingest.metrics import IngestMetrics
from services.ingest.validation import Accepted, RecordChecker

log = logging.getLogger(__name__)

ERROR_PREVIEW_BYTES = 5000
UTF8_BOM = b"\xef\xbb\xbf"
MIN_OUTPUT_EXPIRY_S = 3600
MAX_OUTPUT_EXPIRY_S = 30 * 86400
METADATA_MAX_PAIRS = 16
METADATA_MAX_KEY = 64
METADATA_MAX_VALUE = 512
WINDOW_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


@dataclass
class Rejection:
    line: int
    custom_id: str | None
    code: str
    message: str

    def as_json(self) -> dict[str, Any]:
        return {"line": self.line, "custom_id": self.custom_id, "code": self.code, "message": self.message}

    def message_proto(self) -> batches_pb2.RejectedRecord:
        return batches_pb2.RejectedRecord(
            line=self.line, custom_id=pv.string_or_null(self.custom_id), code=self.code, message=self.message
        )


@dataclass
class CreateResult:
    batch: Row[Any]
    rejections: list[Rejection] = field(default_factory=list)
    """The first rejections (at most `rejected_preview_max`); the file has every one."""
    replayed: bool = False
    """An Idempotency-Key repeat: the batch an earlier identical create made."""
    rejected_codes: Counter[str] = field(default_factory=Counter)
    """How many records were rejected with each code (a new batch's, not a replay's)."""


def window_seconds(window: str) -> int:
    """'24h' → 86400; units s, m, h, d (short windows are for tests and demos)."""
    try:
        seconds = int(window[:-1]) * WINDOW_SECONDS[window[-1]]
        if seconds <= 0:
            raise ValueError(window)
        return seconds
    except (KeyError, ValueError, IndexError):
        raise errors.invalid(
            f"Unsupported completion_window {window!r}.", "invalid_completion_window", "completion_window"
        ) from None


def check_metadata(metadata: dict[str, str]) -> None:
    if len(metadata) > METADATA_MAX_PAIRS:
        raise errors.invalid(
            f"'metadata' may hold at most {METADATA_MAX_PAIRS} pairs.", "invalid_metadata", "metadata"
        )
    for key, value in metadata.items():
        if len(key) > METADATA_MAX_KEY:
            raise errors.invalid(
                f"Metadata key {key[:80]!r} is longer than {METADATA_MAX_KEY} characters.",
                "invalid_metadata",
                "metadata",
            )
        if len(value) > METADATA_MAX_VALUE:
            raise errors.invalid(
                f"Metadata value of {key!r} is longer than {METADATA_MAX_VALUE} characters.",
                "invalid_metadata",
                "metadata",
            )


def parse_priority(value: Any) -> tuple[int, int, str | None]:
    """(tier, integer priority, spelling to echo back) from `standard`/`expedited`/an integer."""
    if value is None or value == "standard":
        return 0, 0, None
    if value == "expedited":
        return 1, 0, orjson.dumps(value).decode()
    if isinstance(value, int) and not isinstance(value, bool) and -1_000_000 <= value <= 1_000_000:
        return 0, value, orjson.dumps(value).decode()
    raise errors.invalid(
        "'priority' must be 'standard', 'expedited' or an integer.", "invalid_priority", "priority"
    )


def check_output_expiry(request: batches_pb2.CreateBatchRequest) -> int | None:
    """Seconds the output and error files live, from `output_expires_after` (or None)."""
    if not request.HasField("output_expires_after"):
        return None
    expiry = request.output_expires_after
    if expiry.anchor != "created_at":
        raise errors.invalid(
            "'output_expires_after.anchor' must be 'created_at'.",
            "invalid_output_expires_after",
            "output_expires_after",
        )
    if not MIN_OUTPUT_EXPIRY_S <= expiry.seconds <= MAX_OUTPUT_EXPIRY_S:
        raise errors.invalid(
            f"'output_expires_after.seconds' must be between {MIN_OUTPUT_EXPIRY_S} and "
            f"{MAX_OUTPUT_EXPIRY_S}.",
            "invalid_output_expires_after",
            "output_expires_after",
        )
    return int(expiry.seconds)


def inline_line(index: int, request: Any, endpoint: str) -> bytes:
    """One inline request as an input-file line; `{custom_id?, body}` is the short form."""
    if isinstance(request, dict) and "body" in request and "url" not in request and "method" not in request:
        request = {
            "custom_id": request.get("custom_id") or f"row-{index + 1}",
            "method": "POST",
            "url": endpoint,
            "body": request["body"],
        }
    return one_line(orjson.dumps(request))


class _Rejections:
    """Every rejection of a create, streamed to a JSONL blob; the first few kept for the answer."""

    def __init__(self, writer: BlobWriter, preview_max: int) -> None:
        self.writer = writer
        self.count = 0
        self.codes: Counter[str] = Counter()
        self.preview: list[Rejection] = []
        self._preview_max = preview_max

    async def add(self, rejection: Rejection) -> None:
        self.count += 1
        self.codes[rejection.code] += 1
        if len(self.preview) < self._preview_max:
            self.preview.append(rejection)
        await self.writer.write(dumps_line(rejection.as_json()))


class RunClaim(Protocol):
    """A create that is the run of a recurring template (services.ingest.template_runs)."""

    template_id: str

    async def claim(self, conn: AsyncConnection) -> None:
        """In the transaction that publishes the run: take the template's due time, or raise
        (another replica made this run) so that the run is discarded."""


@dataclass(frozen=True)
class _Options:
    """What the request asks for beyond its records, checked before anything is stored."""

    tier: int
    priority: int
    priority_spelling: str | None
    output_expiry_s: int | None


@dataclass(frozen=True)
class _Draft:
    """A batch being created: still `validating`, invisible."""

    caller: Principal
    batch: str
    input_file: str
    source_blob: str | None
    """The uploaded input's blob; None for inline requests (stored during the create)."""
    run_of: RunClaim | None = None


@dataclass(frozen=True)
class _Checked:
    total: int
    accepted: int
    model: str | None


class BatchCreator:
    def __init__(
        self,
        settings: Settings,
        db: Database,
        spend: spend_pb2_grpc.SpendServiceStub,
        idempotency: IdempotencyKeys,
        metrics: IngestMetrics | None = None,
    ) -> None:
        self._settings = settings
        self._db = db
        self._spend = spend
        self._idempotency = idempotency
        self._metrics = metrics or IngestMetrics()

    def _check_request(self, request: batches_pb2.CreateBatchRequest, inline: list[Any]) -> None:
        if request.endpoint not in SUPPORTED_ENDPOINTS:
            raise errors.invalid(
                f"Unsupported endpoint {request.endpoint!r}; supported: {', '.join(SUPPORTED_ENDPOINTS)}.",
                "invalid_endpoint",
                "endpoint",
            )
        if request.completion_window not in self._settings.completion_window_list:
            raise errors.invalid(
                f"'completion_window' must be one of {list(self._settings.completion_window_list)}.",
                "invalid_completion_window",
                "completion_window",
            )
        check_metadata(dict(request.metadata))
        if bool(request.input_file_id) == bool(inline):
            raise errors.invalid(
                "Give either 'input_file_id' or inline 'requests'.", "missing_input", "input_file_id"
            )

    async def create(
        self,
        caller: Principal,
        request: batches_pb2.CreateBatchRequest,
        inline: list[Any],
        idempotency_key: str | None = None,
        run_of: RunClaim | None = None,
    ) -> CreateResult:
        """Create a batch from `request`, whose inline records (if any) come as `inline`:
        decoded JSON values, not the request's `requests` field. `run_of`: the batch is a run
        of that template."""
        started = time.monotonic()
        self._check_request(request, inline)
        await check_webhook_url(request.webhook_url, self._settings)
        options = _Options(*parse_priority(pv.to_python(request.priority)), check_output_expiry(request))
        claim: Claim | None = None
        if idempotency_key is not None:
            claimed = await self._idempotency.claim(
                caller.project_id, idempotency_key, request_hash(request, inline)
            )
            if isinstance(claimed, str):
                return await self._replay(caller.project_id, claimed)
            claim = claimed
        try:
            await check_budgets(self._db, self._spend, caller)
            draft = await self._open(caller, request, options, run_of)
            try:
                result = await self._fill(draft, request, inline, options, claim)
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

    async def _replay(self, project_id: str, batch: str) -> CreateResult:
        """The answer of the create that made `batch`, as the batch stands now."""
        async with self._db.read() as conn:
            row = await visible_batch(conn, project_id, batch)
            rejected = (
                await conn.execute(
                    select(items.c.line, items.c.custom_id, items.c.error_code, items.c.error_message)
                    .where(items.c.batch_id == batch, items.c.state == "rejected")
                    .order_by(items.c.idx)
                    .limit(self._settings.rejected_preview_max)
                )
            ).all()
        preview = [Rejection(r.line, r.custom_id, r.error_code, r.error_message) for r in rejected]
        return CreateResult(row, preview, replayed=True)

    def _check_source(self, source: Row[Any]) -> None:
        if source.purpose != "batch":
            raise errors.invalid(
                f"File {source.id!r} has purpose {source.purpose!r}; batches need 'batch'.",
                "invalid_input_file",
                "input_file_id",
            )
        if source.bytes > self._settings.max_file_bytes:
            raise errors.invalid(
                f"The input is {source.bytes} bytes; the limit is {self._settings.max_file_bytes}.",
                "input_too_large",
                "input_file_id",
            )

    async def check_template(self, caller: Principal, request: batches_pb2.CreateBatchRequest) -> None:
        """Check a recurring template's request as a create would, short of reading the
        records (each run does): the fields, the webhook, and the input file."""
        self._check_request(request, [])
        await check_webhook_url(request.webhook_url, self._settings)
        parse_priority(pv.to_python(request.priority))
        check_output_expiry(request)
        await self.check_input_file(caller, request.input_file_id)

    async def check_input_file(self, caller: Principal, file_id: str) -> None:
        """404 unless `file_id` is the caller's; 400 unless it is an input a batch may read."""
        async with self._db.read() as conn:
            self._check_source(await visible_file(conn, caller.project_id, file_id, param="input_file_id"))

    async def _open(
        self,
        caller: Principal,
        request: batches_pb2.CreateBatchRequest,
        options: _Options,
        run_of: RunClaim | None,
    ) -> _Draft:
        """Insert the batch as `validating`, its input file locked meanwhile (step 2)."""
        now = time.time()
        async with self._db.write() as conn:
            if request.input_file_id:
                source = await visible_file(
                    conn, caller.project_id, request.input_file_id, lock_in=self._db, param="input_file_id"
                )
                self._check_source(source)
                draft = _Draft(caller, new_batch_id(), source.id, source.blob_id, run_of)
            else:
                draft = _Draft(caller, new_batch_id(), new_file_id(), None, run_of)
            await conn.execute(
                insert(batches).values(
                    id=draft.batch,
                    project_id=caller.project_id,
                    api_key_id=caller.key_id,
                    endpoint=request.endpoint,
                    input_file_id=draft.input_file,
                    completion_window=request.completion_window,
                    status="validating",
                    created_at=now,
                    expires_at=now + window_seconds(request.completion_window),
                    metadata=orjson.dumps(dict(request.metadata)).decode() if request.metadata else None,
                    priority_tier=options.tier,
                    priority=options.priority,
                    priority_spelling=options.priority_spelling,
                    discount=self._settings.batch_discount(options.tier),
                    webhook_url=request.webhook_url or None,
                    output_expires_after_s=options.output_expiry_s,
                    traceparent=telemetry.current_traceparent() or None,
                    template_id=run_of.template_id if run_of else None,
                )
            )
        return draft

    async def _fill(
        self,
        draft: _Draft,
        request: batches_pb2.CreateBatchRequest,
        inline_requests: list[Any],
        options: _Options,
        claim: Claim | None,
    ) -> CreateResult:
        """Check every record and store the items (step 3), then publish it all (step 4)."""
        owner = f"create:{draft.batch}"
        inline = None
        if draft.source_blob is None:
            inline = await self._store_inline(owner, inline_requests, request.endpoint)
        rejections = _Rejections(BlobWriter(self._db, owner), self._settings.rejected_preview_max)
        blob = inline.blob_id if inline is not None else draft.source_blob
        assert blob is not None
        param = "requests" if inline is not None else "input_file_id"
        checked = await self._check_records(draft.batch, request.endpoint, blob, rejections, param)
        if checked.accepted == 0:
            await self._refuse(draft.caller.project_id, checked, rejections, param)
        project = draft.caller.project_id
        crash_point("ingest.create.before_publish")
        async with self._db.write() as conn:
            if inline is not None:
                await self._publish(
                    conn, inline, draft.input_file, project, "inline-requests.jsonl", "batch", checked.total
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
                    "batch_output",
                    rejections.count,
                    batch_id=draft.batch,
                    lifetime_s=options.output_expiry_s,
                )
            moved = await batch_status.transition(
                conn,
                draft.batch,
                "in_progress",
                total=checked.total,
                rejected_count=rejections.count,
                failed_count=rejections.count,
                model=checked.model,
                rejected_file_id=rejected_file,
            )
            if not moved:
                raise errors.ApiError(500, "The batch changed while it was being created.", "server_error")
            if claim is not None:
                await claim.bind(conn, draft.batch)
            if draft.run_of is not None:
                await draft.run_of.claim(conn)
            row = (await conn.execute(select(batches).where(batches.c.id == draft.batch))).one()
        return CreateResult(row, rejections.preview, rejected_codes=rejections.codes)

    async def _store_inline(self, owner: str, requests: list[Any], endpoint: str) -> BlobWriter:
        """The inline requests as an input-file blob, stored but not yet published."""
        writer = BlobWriter(self._db, owner)
        for index, value in enumerate(requests):
            await writer.write(inline_line(index, value, endpoint) + b"\n")
            if writer.size > self._settings.max_inline_bytes:
                raise errors.ApiError(
                    413,
                    f"Inline requests exceed {self._settings.max_inline_bytes} bytes, the limit per "
                    "request; upload them as a file instead.",
                    "input_too_large",
                    "requests",
                )
        await writer.flush()
        return writer

    async def _check_records(
        self, batch: str, endpoint: str, blob: str, rejections: _Rejections, param: str
    ) -> _Checked:
        """Stream the input once: check each record, insert its item, collect rejections."""
        checker = RecordChecker(self._settings, endpoint)
        writer = ItemWriter(self._db)
        operation = telemetry.gen_ai_operation(endpoint)
        index = 0
        accepted = 0
        try:
            async for line_number, raw in _numbered(read_lines(self._db, blob)):
                if not raw or raw.isspace():
                    continue
                if index >= self._settings.max_batch_records:
                    raise errors.invalid(
                        f"The input has more than {self._settings.max_batch_records} records, "
                        f"the limit per batch.",
                        "input_too_large",
                        param,
                    )
                outcome = checker.check(raw)
                traceparent = None
                if isinstance(outcome, Accepted) and telemetry.sample_new_item("ingest"):
                    traceparent = telemetry.start_item_trace(
                        "ingest", _item_trace(batch, index, outcome, operation)
                    )
                await writer.add(item_row(batch, index, line_number, outcome, traceparent))
                if isinstance(outcome, Accepted):
                    accepted += 1
                else:
                    await rejections.add(
                        Rejection(line_number, outcome.custom_id, outcome.code, outcome.message)
                    )
                index += 1
            await writer.close()
        except BaseException:
            await writer.abandon()
            raise
        if index == 0:
            raise errors.invalid("The input has no records.", "empty_file", param)
        return _Checked(index, accepted, checker.model)

    async def _refuse(
        self, project_id: str, checked: _Checked, rejections: _Rejections, param: str
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
                "batch_output",
                rejections.count,
            )
        raise errors.invalid(
            f"None of the {checked.total} records can run; see 'rejected_records'.",
            "no_valid_records",
            param,
            rejected_count=rejections.count,
            rejected_records=_error_preview(rejections.preview),
            rejected_records_file_id=rejected_file,
        )

    async def _publish(
        self,
        conn: AsyncConnection,
        writer: BlobWriter,
        ident: str,
        project_id: str,
        filename: str,
        purpose: str,
        line_count: int,
        batch_id: str | None = None,
        lifetime_s: int | None = None,
    ) -> None:
        """Complete `writer`'s blob and make it the file `ident`, in the caller's transaction."""
        now = time.time()
        await conn.execute(
            insert(files).values(
                id=ident,
                project_id=project_id,
                filename=filename,
                purpose=purpose,
                bytes=writer.size,
                line_count=line_count,
                blob_id=await writer.finish(conn),
                status="processed",
                created_at=now,
                expires_at=now + (lifetime_s or self._settings.file_expiry_days * 86400),
                batch_id=batch_id,
            )
        )


def _item_trace(batch: str, index: int, accepted: Accepted, operation: str) -> dict[str, Any]:
    """The attributes of an item's first span (its acceptance)."""
    return {
        **telemetry.item_attributes(batch, index, accepted.custom_id),
        "gen_ai.operation.name": operation,
        "gen_ai.request.model": accepted.model,
    }


def _error_preview(rejections: list[Rejection]) -> list[dict[str, Any]]:
    """Rejections that fit in an error answer: it travels as gRPC trailing metadata, which
    clients cap at 8 KiB by default. The rejections file always has all of them."""
    preview: list[dict[str, Any]] = []
    size = 0
    for rejection in rejections:
        entry = rejection.as_json()
        size += len(orjson.dumps(entry)) + 1
        if size > ERROR_PREVIEW_BYTES:
            break
        preview.append(entry)
    return preview


async def _numbered(lines: AsyncIterator[bytes]) -> AsyncIterator[tuple[int, bytes]]:
    """(line number from 1, line); a UTF-8 byte order mark opening the input is dropped."""
    number = 0
    async for line in lines:
        number += 1
        if number == 1 and line.startswith(UTF8_BOM):
            line = line[len(UTF8_BOM) :]
        yield number, line


async def discard_batch(db: Database, batch: str) -> None:
    """Remove a batch that never left `validating`, with its items and unpublished blobs."""
    async with db.write() as conn:
        gone = await conn.execute(
            delete(batches).where(batches.c.id == batch, batches.c.status == "validating")
        )
        if gone.rowcount:
            await conn.execute(delete(items).where(items.c.batch_id == batch))
    await reclaim_owned(db, f"create:{batch}")


async def sweep_stale_creates(db: Database, older_than_s: float) -> int:
    """Remove batches a crashed create left in `validating`."""
    cutoff = time.time() - older_than_s
    async with db.read() as conn:
        stale = (
            (
                await conn.execute(
                    select(batches.c.id).where(
                        batches.c.status == "validating", batches.c.created_at < cutoff
                    )
                )
            )
            .scalars()
            .all()
        )
    for batch in stale:
        log.warning("removing batch %s left validating by an interrupted create", batch)
        await discard_batch(db, batch)
    return len(stale)
