"""FilesService: upload, list, get, delete and download files."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import grpc
from google.api import httpbody_pb2

from batchgate.services.common import errors, paging, rest_input
from batchgate.services.common.caller import principal
from batchgate.services.common.config import Settings
from batchgate.services.common.db import Database, batches, files
from batchgate.services.common.db.blobs import BlobWriter, delete_blob, read_blob
from batchgate.services.common.http_bodies import http_bodies
from batchgate.services.common.ids import FILE_ID_PREFIX, file_id
from batchgate.services.common.states import ACCEPTED_PURPOSES, LISTED_PURPOSES, BatchStatus, FilePurpose
from batchgate.services.ingest.lookup import visible_file
from batchgate.services.ingest.upload import receive_upload
from batchgate.services.ingest.views import file_message
from batchgate.v1 import files_pb2, files_pb2_grpc

FORM_FIELDS = ("purpose", "expires_after[anchor]", "expires_after[seconds]")  # besides `file`
MIN_EXPIRY_S = 3600
MAX_EXPIRY_S = 30 * 24 * 3600
JSONL = "application/jsonl"


def _invalid_purpose(allowed: tuple[FilePurpose, ...], given: str | None) -> errors.ApiError:
    """400 for an upload's or a listing's `purpose` outside `allowed`, or an upload without one
    (`given` None), in OpenAI's words rather than Python's reprs (a long one cut short)."""
    if given is None:
        return errors.invalid("Missing required parameter: 'purpose'.", "invalid_purpose", "purpose")
    choices = " or ".join(f"'{p.value}'" for p in allowed)
    return errors.invalid(f"'purpose' must be {choices}, not '{given[:80]}'.", "invalid_purpose", "purpose")


def _expiry(fields: dict[str, str], created_at: float, default_days: int) -> float:
    anchor = fields.get("expires_after[anchor]")
    seconds = fields.get("expires_after[seconds]")
    if anchor is None and seconds is None:
        return created_at + default_days * 86400
    if anchor != "created_at":
        raise errors.invalid(
            "'expires_after[anchor]' must be 'created_at'.", "invalid_expires_after", "expires_after[anchor]"
        )
    try:
        value = int(seconds or "")
    except ValueError:
        value = -1
    if not MIN_EXPIRY_S <= value <= MAX_EXPIRY_S:
        raise errors.invalid(
            f"'expires_after[seconds]' must be an integer between {MIN_EXPIRY_S} and {MAX_EXPIRY_S}.",
            "invalid_expires_after",
            "expires_after[seconds]",
        )
    return created_at + value


async def _body_chunks(
    requests: AsyncIterator[httpbody_pb2.HttpBody], *, gzip_coded: bool
) -> AsyncIterator[tuple[str, bytes]]:
    """The upload's (content type, data) messages. A gzip body that inflated to nothing arrives
    as a stream without data: its end is 400 `invalid_content_encoding`, not a malformed form."""
    received = 0
    async for message in requests:
        received += len(message.data)
        yield message.content_type, message.data
    if gzip_coded and not received:
        raise rest_input.not_inflated()


class FilesServicer(files_pb2_grpc.FilesServiceServicer):
    def __init__(self, settings: Settings, db: Database) -> None:
        self._settings = settings
        self._db = db

    def _check_fields(self, fields: dict[str, str], final: bool = False) -> None:
        """`purpose` and `expires_after[…]`, once given (all of them once `final`); no others."""
        unknown = next((name for name in fields if name not in FORM_FIELDS), None)
        if unknown is not None:
            raise errors.invalid(f"Unknown parameter: '{unknown}'.", "unknown_parameter", unknown)
        purpose = fields.get("purpose")
        if (final or purpose is not None) and purpose not in ACCEPTED_PURPOSES:
            raise _invalid_purpose(ACCEPTED_PURPOSES, purpose)
        if final or {"expires_after[anchor]", "expires_after[seconds]"} <= fields.keys():
            _expiry(fields, time.time(), self._settings.file_expiry_days)

    async def CreateFile(
        self, request_iterator: AsyncIterator[httpbody_pb2.HttpBody], context: grpc.aio.ServicerContext
    ) -> files_pb2.File:
        caller = principal()
        writer = BlobWriter(self._db, owner=f"upload:{caller.project_id}")
        try:
            chunks = _body_chunks(
                request_iterator, gzip_coded=rest_input.gzip_coded(context.invocation_metadata() or ())
            )
            upload = await receive_upload(chunks, writer, self._settings.max_file_bytes, self._check_fields)
            self._check_fields(upload.fields, final=True)
            if upload.size == 0:
                raise errors.invalid("The file is empty.", "empty_file", "file")
            now = time.time()
            expires_at = _expiry(upload.fields, now, self._settings.file_expiry_days)
            ident = file_id()
            async with self._db.write() as conn:
                blob = await writer.finish(conn)
                await files.insert_file(
                    conn,
                    file_id=ident,
                    project_id=caller.project_id,
                    filename=upload.filename or "upload.jsonl",
                    purpose=upload.fields["purpose"],
                    blob_id=blob,
                    size=upload.size,
                    line_count=upload.line_count,
                    created_at=now,
                    expires_at=expires_at,
                )
                row = await files.get(conn, ident)
        except BaseException:
            await writer.abort()
            raise
        return file_message(row)

    async def ListFiles(
        self, request: files_pb2.ListFilesRequest, context: grpc.aio.ServicerContext
    ) -> files_pb2.ListFilesResponse:
        caller = principal()
        limit = paging.page_limit(request, default=10_000, maximum=10_000)
        order = request.order or "desc"
        if order not in ("asc", "desc"):
            raise errors.invalid("'order' must be 'asc' or 'desc'.", "invalid_order", "order")
        if request.purpose and request.purpose not in LISTED_PURPOSES:
            raise _invalid_purpose(LISTED_PURPOSES, request.purpose)
        async with self._db.read() as conn:
            if request.after:
                paging.cursor_id("file", FILE_ID_PREFIX, request.after)
            rows = await files.page(
                conn,
                caller.project_id,
                purpose=request.purpose,
                after=request.after,
                ascending=order == "asc",
                limit=limit + 1,
            )
        page = [file_message(r) for r in rows[:limit]]
        return files_pb2.ListFilesResponse(**paging.page_fields(page, len(rows) > limit))

    async def GetFile(
        self, request: files_pb2.GetFileRequest, context: grpc.aio.ServicerContext
    ) -> files_pb2.File:
        async with self._db.read() as conn:
            return file_message(await visible_file(conn, principal().project_id, request.file_id))

    async def DeleteFile(
        self, request: files_pb2.DeleteFileRequest, context: grpc.aio.ServicerContext
    ) -> files_pb2.DeleteFileResponse:
        caller = principal()
        async with self._db.write() as conn:
            row = await visible_file(conn, caller.project_id, request.file_id, lock_in=self._db)
            readers = await batches.open_readers(conn, row.id)
            running = [r.id for r in readers if r.status != BatchStatus.VALIDATING]
            if running:
                raise errors.conflict(
                    f"File '{row.id}' is the input of batch '{running[0]}', which is still running.",
                    "file_in_use",
                )
            if readers:  # a create in progress, or one that was interrupted: its batch is invisible
                cleanup_min = (
                    self._settings.validating_timeout_s + self._settings.ingest_sweep_interval_s
                ) / 60
                raise errors.conflict(
                    f"File '{row.id}' is being read by a batch that is still being created. Try again "
                    "once that create has answered; if it was interrupted, the file is freed within "
                    f"{cleanup_min:.0f} minutes.",
                    "file_in_use",
                )
            await files.delete_file(conn, row.id)
            await delete_blob(conn, row.blob_id)
        return files_pb2.DeleteFileResponse(id=row.id, object="file", deleted=True)

    async def GetFileContent(
        self, request: files_pb2.GetFileContentRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[httpbody_pb2.HttpBody]:
        async with self._db.read() as conn:
            row = await visible_file(conn, principal().project_id, request.file_id)
        async for body in http_bodies(read_blob(self._db, row.blob_id), JSONL):
            yield body
