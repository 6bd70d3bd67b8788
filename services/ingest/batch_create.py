"""Creating a batch: read the input once, check every record, store items in chunks.

The batch row exists as `validating` while its items are written in chunks (short write
transactions, so one large create never holds the SQLite writer for seconds). It becomes
visible work only in the last transaction (`validating → in_progress`). Any failure removes
everything written; a crash mid-create leaves a `validating` batch that `sweep_stale_creates`
removes. Rejected records are stored as items in state `rejected`, so the error file lists
them in input order with the rest.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import orjson
from sqlalchemy import Row, delete, insert, select
from sqlalchemy.ext.asyncio import AsyncConnection

from batchgate.v1 import batches_pb2
from services.common import batch_status, errors
from services.common import proto_values as pv
from services.common.auth import Principal
from services.common.config import SUPPORTED_ENDPOINTS, Settings
from services.common.db import Database
from services.common.db.schema import batches, files, items
from services.common.ids import batch_id as new_batch_id
from services.common.ids import file_id as new_file_id
from services.common.storage import BlobWriter, read_lines
from services.ingest.files_servicer import visible_file
from services.ingest.validation import Accepted, RecordChecker, Rejected

log = logging.getLogger(__name__)

INSERT_CHUNK = 2000
ERROR_PREVIEW_BYTES = 5000
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


def inline_line(index: int, request: Any, endpoint: str) -> bytes:
    """One inline request as an input-file line; `{custom_id?, body}` is the short form."""
    if isinstance(request, dict) and "body" in request and "url" not in request and "method" not in request:
        request = {
            "custom_id": request.get("custom_id") or f"row-{index + 1}",
            "method": "POST",
            "url": endpoint,
            "body": request["body"],
        }
    return orjson.dumps(request)


class BatchCreator:
    def __init__(self, settings: Settings, db: Database) -> None:
        self._settings = settings
        self._db = db

    def _check_request(self, request: batches_pb2.CreateBatchRequest) -> None:
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
        if bool(request.input_file_id) == bool(len(request.requests)):
            raise errors.invalid(
                "Give either 'input_file_id' or inline 'requests'.", "missing_input", "input_file_id"
            )

    async def _store_inline(self, caller: Principal, request: batches_pb2.CreateBatchRequest) -> Row[Any]:
        writer = BlobWriter(self._db, owner=f"inline:{caller.project_id}")
        try:
            lines = 0
            for index, value in enumerate(request.requests):
                await writer.write(inline_line(index, pv.to_python(value), request.endpoint) + b"\n")
                lines += 1
                if writer.size > self._settings.max_inline_bytes:
                    raise errors.ApiError(
                        413,
                        f"Inline requests exceed {self._settings.max_inline_bytes} bytes.",
                        "input_too_large",
                        "requests",
                    )
            ident, now = new_file_id(), time.time()
            async with self._db.write() as conn:
                blob = await writer.finish(conn)
                await conn.execute(
                    insert(files).values(
                        id=ident,
                        project_id=caller.project_id,
                        filename="inline-requests.jsonl",
                        purpose="batch",
                        bytes=writer.size,
                        line_count=lines,
                        blob_id=blob,
                        status="processed",
                        created_at=now,
                        expires_at=now + self._settings.file_expiry_days * 86400,
                    )
                )
                return (await conn.execute(select(files).where(files.c.id == ident))).one()
        except BaseException:
            await writer.abort()
            raise

    async def create(self, caller: Principal, request: batches_pb2.CreateBatchRequest) -> CreateResult:
        self._check_request(request)
        tier, priority, spelling = parse_priority(pv.to_python(request.priority))
        if request.input_file_id:
            async with self._db.read() as conn:
                source = await visible_file(conn, caller.project_id, request.input_file_id)
            if source.purpose != "batch":
                raise errors.invalid(
                    f"File {source.id!r} has purpose {source.purpose!r}; batches need 'batch'.",
                    "invalid_input_file",
                    "input_file_id",
                )
        else:
            source = await self._store_inline(caller, request)
        if source.bytes > self._settings.max_file_bytes:
            raise errors.invalid(
                f"The input is {source.bytes} bytes; the limit is {self._settings.max_file_bytes}.",
                "input_too_large",
                "input_file_id",
            )
        now = time.time()
        batch = new_batch_id()
        output_expiry = (
            request.output_expires_after.seconds if request.HasField("output_expires_after") else None
        )
        async with self._db.write() as conn:
            await conn.execute(
                insert(batches).values(
                    id=batch,
                    project_id=caller.project_id,
                    api_key_id=caller.key_id,
                    endpoint=request.endpoint,
                    input_file_id=source.id,
                    completion_window=request.completion_window,
                    status="validating",
                    created_at=now,
                    expires_at=now + window_seconds(request.completion_window),
                    metadata=orjson.dumps(dict(request.metadata)).decode() if request.metadata else None,
                    priority_tier=tier,
                    priority=priority,
                    priority_spelling=spelling,
                    discount=0.0 if tier else 0.5,
                    webhook_url=request.webhook_url or None,
                    output_expires_after_s=output_expiry,
                )
            )
        try:
            return await self._fill(batch, request.endpoint, source)
        except BaseException:
            await discard_batch(self._db, batch)
            raise

    async def _fill(self, batch: str, endpoint: str, source: Row[Any]) -> CreateResult:
        checker = RecordChecker(self._settings, endpoint)
        rejections: list[Rejection] = []
        rows: list[dict[str, Any]] = []
        index = 0
        accepted = 0
        async for line_number, raw in _numbered(read_lines(self._db, source.blob_id)):
            if not raw.strip():
                continue
            if index >= self._settings.max_batch_records:
                raise errors.invalid(
                    f"The input has more than {self._settings.max_batch_records} records, "
                    f"the limit per batch.",
                    "input_too_large",
                    "input_file_id",
                )
            outcome = checker.check(raw)
            rows.append(_item_row(batch, index, line_number, outcome))
            if isinstance(outcome, Accepted):
                accepted += 1
            else:
                rejections.append(Rejection(line_number, outcome.custom_id, outcome.code, outcome.message))
            index += 1
            if len(rows) >= INSERT_CHUNK:
                await self._insert(rows)
                rows = []
        if index == 0:
            raise errors.invalid("The input has no records.", "empty_file", "input_file_id")
        if accepted == 0:
            rejected_file = await self._rejections_file(source.project_id, batch, rejections)
            preview = _error_preview(rejections[: self._settings.rejected_preview_max])
            raise errors.invalid(
                f"None of the {index} records can run; see 'rejected_records'.",
                "no_valid_records",
                "input_file_id",
                rejected_count=len(rejections),
                rejected_records=preview,
                rejected_records_file_id=rejected_file,
            )
        if rows:
            await self._insert(rows)
        rejected_file = (
            await self._rejections_file(source.project_id, batch, rejections) if rejections else None
        )
        async with self._db.write() as conn:
            moved = await batch_status.transition(
                conn,
                batch,
                "in_progress",
                total=index,
                rejected_count=len(rejections),
                failed_count=len(rejections),
                model=checker.model,
                rejected_file_id=rejected_file,
            )
            if not moved:
                raise errors.ApiError(500, "The batch changed while it was being created.", "server_error")
            row = (await conn.execute(select(batches).where(batches.c.id == batch))).one()
        return CreateResult(row, rejections)

    async def _insert(self, rows: list[dict[str, Any]]) -> None:
        async with self._db.write() as conn:
            await conn.execute(insert(items), rows)

    async def _rejections_file(self, project_id: str, batch: str, rejections: list[Rejection]) -> str:
        writer = BlobWriter(self._db, owner=f"rejections:{batch}")
        try:
            for rejection in rejections:
                await writer.write(orjson.dumps(rejection.as_json()) + b"\n")
            ident, now = new_file_id(), time.time()
            async with self._db.write() as conn:
                blob = await writer.finish(conn)
                await conn.execute(
                    insert(files).values(
                        id=ident,
                        project_id=project_id,
                        filename=f"{batch}_rejected_records.jsonl",
                        purpose="batch_output",
                        bytes=writer.size,
                        line_count=len(rejections),
                        blob_id=blob,
                        status="processed",
                        created_at=now,
                        expires_at=now + self._settings.file_expiry_days * 86400,
                        batch_id=batch,
                    )
                )
            return ident
        except BaseException:
            await writer.abort()
            raise


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
    number = 0
    async for line in lines:
        number += 1
        yield number, line


def _item_row(batch: str, index: int, line: int, outcome: Accepted | Rejected) -> dict[str, Any]:
    if isinstance(outcome, Accepted):
        return {
            "batch_id": batch,
            "idx": index,
            "line": line,
            "custom_id": outcome.custom_id,
            "state": "queued",
            "body": outcome.body,
            "error_code": None,
            "error_message": None,
            "finished_at": None,
        }
    return {
        "batch_id": batch,
        "idx": index,
        "line": line,
        "custom_id": outcome.custom_id,
        "state": "rejected",
        "body": None,
        "error_code": outcome.code,
        "error_message": outcome.message,
        "finished_at": time.time(),
    }


async def discard_batch(db: Database, batch: str) -> None:
    """Remove a batch that never left `validating`, with its items."""
    async with db.write() as conn:
        await _discard(conn, batch)


async def _discard(conn: AsyncConnection, batch: str) -> None:
    await conn.execute(delete(items).where(items.c.batch_id == batch))
    await conn.execute(delete(batches).where(batches.c.id == batch, batches.c.status == "validating"))


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
