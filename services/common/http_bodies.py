"""Streaming a download as `google.api.HttpBody` messages, which Envoy's transcoder writes to
the client as one body: files, a batch's results, a Message Batch's results.

Every message stays within `BODY_CHUNK_BYTES`, whatever the producer hands over: a page of
large results rendered at once (answers of hundreds of KB, a thousand to a page) passed the
gRPC message limit, and the download failed with a 413 about a "request".
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator

from google.api import httpbody_pb2

BODY_CHUNK_BYTES = 1024 * 1024
"""The most data per message; `setting_checks.MIN_GRPC_MESSAGE_BYTES` leaves room for it."""


async def http_bodies(
    chunks: AsyncIterable[bytes], content_type: str
) -> AsyncIterator[httpbody_pb2.HttpBody]:
    """`chunks` as messages of at most `BODY_CHUNK_BYTES`, the first naming `content_type`
    (no data at all still answers one empty body with it)."""
    first = True
    async for data in chunks:
        for start in range(0, len(data), BODY_CHUNK_BYTES):
            piece = data[start : start + BODY_CHUNK_BYTES]  # the whole `data` itself when it fits
            yield httpbody_pb2.HttpBody(content_type=content_type if first else "", data=piece)
            first = False
    if first:
        yield httpbody_pb2.HttpBody(content_type=content_type, data=b"")
