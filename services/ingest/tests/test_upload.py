"""Streaming multipart parsing: fields kept, file bytes counted and passed through in order."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from batchgate.services.common.errors import ApiError
from batchgate.services.ingest.upload import receive_upload

BOUNDARY = "XyZ"
CONTENT_TYPE = f"multipart/form-data; boundary={BOUNDARY}"


def body(file_bytes: bytes, **fields: str) -> bytes:
    parts = [
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode()
        for k, v in fields.items()
    ]
    parts.append(
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="in.jsonl"\r\n'
        f"Content-Type: application/octet-stream\r\n\r\n".encode()
        + file_bytes
        + b"\r\n"
    )
    return b"".join(parts) + f"--{BOUNDARY}--\r\n".encode()


class MemoryWriter:
    def __init__(self) -> None:
        self.data = bytearray()

    async def write(self, data: bytes) -> None:
        self.data += data


async def chunks(data: bytes, size: int) -> AsyncIterator[tuple[str, bytes]]:
    for i in range(0, len(data), size):
        yield (CONTENT_TYPE if i == 0 else "", data[i : i + size])


@pytest.mark.parametrize("chunk_size", [1, 7, 4096])
async def test_file_part_is_streamed_and_counted(chunk_size: int) -> None:
    content = b'{"a":1}\n{"b":2}\n{"c":3}'
    writer = MemoryWriter()
    upload = await receive_upload(chunks(body(content, purpose="batch"), chunk_size), writer, 10_000)  # type: ignore[arg-type]
    assert bytes(writer.data) == content
    assert upload.fields == {"purpose": "batch"}
    assert upload.filename == "in.jsonl"
    assert upload.size == len(content)
    assert upload.line_count == 3


async def test_the_size_cap_stops_the_upload_with_413() -> None:
    writer = MemoryWriter()
    with pytest.raises(ApiError) as caught:
        await receive_upload(chunks(body(b"x" * 5000, purpose="batch"), 512), writer, 1000)  # type: ignore[arg-type]
    assert caught.value.status == 413
    assert len(writer.data) <= 1512  # stopped as soon as the cap was passed


async def test_a_body_that_is_not_multipart_is_refused() -> None:
    async def plain() -> AsyncIterator[tuple[str, bytes]]:
        yield ("application/json", b"{}")

    with pytest.raises(ApiError) as caught:
        await receive_upload(plain(), MemoryWriter(), 1000)  # type: ignore[arg-type]
    assert caught.value.status == 400


@pytest.mark.parametrize("cut_at", [-3, -len(f"--{BOUNDARY}--\r\n"), -40])
async def test_a_body_cut_before_its_closing_boundary_is_400(cut_at: int) -> None:
    """A client that dies mid-upload leaves a stream that just ends; what arrived is not a file."""
    whole = body(b'{"a":1}\n' * 20, purpose="batch")
    with pytest.raises(ApiError) as caught:
        await receive_upload(chunks(whole[:cut_at], 16), MemoryWriter(), 10_000)  # type: ignore[arg-type]
    assert (caught.value.status, caught.value.code) == (400, "invalid_multipart")
    assert "cut short" in caught.value.message


async def test_a_closing_boundary_without_its_line_break_ends_the_body() -> None:
    whole = body(b'{"a":1}\n', purpose="batch")
    upload = await receive_upload(chunks(whole.removesuffix(b"\r\n"), 16), MemoryWriter(), 10_000)  # type: ignore[arg-type]
    assert upload.size == len(b'{"a":1}\n')


async def test_a_body_without_its_boundary_is_400_in_plain_words() -> None:
    """The parser's own words leaked: "Expected boundary character 45, got 104 at index 2"."""
    with pytest.raises(ApiError) as caught:
        await receive_upload(
            chunks(b"hello, this is not a form\r\n", 16),
            MemoryWriter(),
            10_000,  # type: ignore[arg-type]
        )
    assert (caught.value.status, caught.value.code) == (400, "invalid_multipart")
    assert "at byte" in caught.value.message and "boundary its Content-Type names" in caught.value.message
    assert "character 45" not in caught.value.message
