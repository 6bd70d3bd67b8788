"""Streaming multipart/form-data parsing for uploads: the file part goes straight to a blob.

Envoy hands the request body to `CreateFile` as a stream of HttpBody messages (about 1 MiB
each); the first carries the `multipart/form-data; boundary=…` content type. Form fields are
small and kept; the `file` part is counted (bytes, lines) and written through a `BlobWriter`
as it arrives, so memory stays flat whatever the file size. The size cap is enforced here:
Envoy does not cap streamed bodies.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import MultipartParser, MultipartState, parse_options_header

from batchgate.services.common import errors
from batchgate.services.common.db.blobs import BlobWriter

MAX_FIELD_BYTES = 64 * 1024
MAX_FILENAME_CHARS = 512  # files.filename


@dataclass
class Upload:
    """What a parsed upload carried."""

    fields: dict[str, str] = field(default_factory=dict)
    filename: str | None = None
    size: int = 0
    line_count: int = 0
    ends_with_newline: bool = True


class _PartCollector:
    """python-multipart callbacks; file bytes are queued for the async writer."""

    def __init__(self, check_fields: Callable[[dict[str, str]], None]) -> None:
        self._check_fields = check_fields
        self.upload = Upload()
        self.pending: list[bytes] = []
        self._header_field = b""
        self._header_value = b""
        self._headers: dict[bytes, bytes] = {}
        self._name: str | None = None
        self._is_file = False
        self._value = bytearray()

    def on_part_begin(self) -> None:
        self._headers = {}
        self._name = None
        self._is_file = False
        self._value = bytearray()

    def on_header_field(self, data: bytes, start: int, end: int) -> None:
        self._header_field += data[start:end]

    def on_header_value(self, data: bytes, start: int, end: int) -> None:
        self._header_value += data[start:end]

    def on_header_end(self) -> None:
        self._headers[self._header_field.lower()] = self._header_value
        self._header_field = b""
        self._header_value = b""

    def on_headers_finished(self) -> None:
        _, options = parse_options_header(self._headers.get(b"content-disposition", b""))
        name = options.get(b"name")
        self._name = name.decode("utf-8", "replace") if name is not None else None
        if self._name == "file":
            if self.upload.filename is not None:
                raise errors.invalid("Only one 'file' part is allowed.", "invalid_multipart", "file")
            self._check_fields(self.upload.fields)  # refuse before storing the file, if we can
            self._is_file = True
            self.upload.filename = _filename(options.get(b"filename"))

    def on_part_data(self, data: bytes, start: int, end: int) -> None:
        if self._is_file:
            chunk = data[start:end]
            if chunk:
                self.pending.append(chunk)
                self.upload.size += len(chunk)
                self.upload.line_count += chunk.count(b"\n")
                self.upload.ends_with_newline = chunk.endswith(b"\n")
        else:
            self._value += data[start:end]
            if len(self._value) > MAX_FIELD_BYTES:
                raise errors.invalid(
                    f"Form field '{self._name}' is too long.", "invalid_multipart", self._name
                )

    def on_part_end(self) -> None:
        if not self._is_file and self._name is not None:
            self.upload.fields[self._name] = self._value.decode("utf-8", "replace")


def _filename(raw: bytes | None) -> str:
    """The client's file name, made storable (no NULs, at most MAX_FILENAME_CHARS)."""
    name = raw.decode("utf-8", "replace").replace("\x00", "") if raw else ""
    return name[:MAX_FILENAME_CHARS] or "upload.jsonl"


def _malformed(exc: MultipartParseError) -> errors.ApiError:
    """The parser's own words ("Expected boundary character 45, got 104 at index 2") are its
    internals: the answer says where, and what a well-formed body looks like."""
    where = f" at byte {exc.offset}" if exc.offset >= 0 else ""
    return errors.invalid(
        f"The multipart/form-data body is malformed{where}: it must be parts separated by the "
        "boundary its Content-Type names, each with short headers (Content-Disposition naming "
        "the field), as `curl -F` or an SDK sends it.",
        "invalid_multipart",
    )


def _boundary(content_type: str) -> bytes:
    kind, options = parse_options_header(content_type)
    if kind != b"multipart/form-data" or not options.get(b"boundary"):
        raise errors.invalid(
            "Uploads must be multipart/form-data with a 'file' part.", "invalid_content_type"
        )
    return options[b"boundary"]


async def receive_upload(
    chunks: AsyncIterator[tuple[str, bytes]],
    writer: BlobWriter,
    max_bytes: int,
    check_fields: Callable[[dict[str, str]], None] = lambda _fields: None,
) -> Upload:
    """Parse (content_type, data) messages, streaming the file part into `writer`.

    `check_fields` sees the form fields that precede the file part before any file byte is
    stored (clients send `purpose` first), so a bad field costs no upload. Raises ApiError
    413 as soon as the file part passes `max_bytes`, and 400 for a body that stops before its
    closing boundary; the caller aborts the writer on any error so nothing partial stays.
    """
    collector = _PartCollector(check_fields)
    parser: MultipartParser | None = None
    async for content_type, data in chunks:
        if parser is None:
            if not content_type:
                raise errors.invalid("Missing multipart content type.", "invalid_content_type")
            parser = MultipartParser(
                _boundary(content_type),
                callbacks={
                    "on_part_begin": collector.on_part_begin,
                    "on_header_field": collector.on_header_field,
                    "on_header_value": collector.on_header_value,
                    "on_header_end": collector.on_header_end,
                    "on_headers_finished": collector.on_headers_finished,
                    "on_part_data": collector.on_part_data,
                    "on_part_end": collector.on_part_end,
                },
            )
        try:
            parser.write(data)
        except MultipartParseError as exc:
            raise _malformed(exc) from None
        if collector.upload.size > max_bytes:
            raise errors.ApiError(
                413, f"File is too large: the limit is {max_bytes} bytes.", "file_too_large", "file"
            )
        for piece in collector.pending:
            await writer.write(piece)
        collector.pending.clear()
    if parser is None:
        raise errors.invalid("The upload was empty.", "empty_file", "file")
    try:
        parser.finalize()
    except MultipartParseError as exc:
        raise _malformed(exc) from None
    if parser.state != MultipartState.END:
        # A client that died mid-upload: the stream ends (gRPC reads a reset as its end) with
        # no closing boundary, and the file part holds only what arrived.
        raise errors.invalid(
            "The multipart/form-data body ended before its closing boundary: the upload was cut short.",
            "invalid_multipart",
        )
    upload = collector.upload
    if upload.filename is None:
        raise errors.invalid("The upload has no 'file' part.", "missing_file", "file")
    if upload.size and not upload.ends_with_newline:
        upload.line_count += 1
    return upload
