"""A blob being written is dropped when its writer aborts, and only then: once the transaction
that published it committed, an abort (a task cancelled while awaiting that commit) keeps it."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import func, select

from batchgate.services.common.db import Database
from batchgate.services.common.db.blobs import CHUNK_BYTES, BlobWriter, read_blob
from batchgate.services.common.db.schema import blob_chunks, blobs


async def stored(db: Database, blob_id: str) -> tuple[int, int]:
    """(rows in `blobs`, rows in `blob_chunks`) of the blob."""
    async with db.read() as conn:
        heads = await conn.scalar(select(func.count()).select_from(blobs).where(blobs.c.id == blob_id))
        parts = await conn.scalar(
            select(func.count()).select_from(blob_chunks).where(blob_chunks.c.blob_id == blob_id)
        )
    return int(heads or 0), int(parts or 0)


async def test_an_abort_before_publishing_drops_every_chunk_written(db: Database) -> None:
    writer = BlobWriter(db, owner="upload:default")
    await writer.write(b"x" * (2 * CHUNK_BYTES + 10))  # two chunks stored in their own transactions
    assert await stored(db, writer.blob_id) == (1, 2)
    await writer.abort()
    assert await stored(db, writer.blob_id) == (0, 0)


async def test_an_abort_after_the_publishing_commit_keeps_the_blob(db: Database) -> None:
    writer = BlobWriter(db, owner="upload:default")
    content = b"y" * (CHUNK_BYTES + 5)
    await writer.write(content)
    async with db.write() as conn:
        blob_id = await writer.finish(conn)
    await writer.abort()
    assert b"".join([chunk async for chunk in read_blob(db, blob_id)]) == content


async def test_an_abort_whose_caller_is_cancelled_still_drops_the_blob(db: Database) -> None:
    """gRPC cancels an upload's handler when its client goes away, often mid-cleanup."""
    writer = BlobWriter(db, owner="upload:default")
    await writer.write(b"z" * (CHUNK_BYTES + 1))
    caller = asyncio.ensure_future(writer.abort())
    await asyncio.sleep(0)  # the abort has started
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    for _ in range(100):
        if await stored(db, writer.blob_id) == (0, 0):
            break
        await asyncio.sleep(0.05)
    assert await stored(db, writer.blob_id) == (0, 0)
