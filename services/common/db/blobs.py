"""Blob store in the database, so every replica sees every file without a shared disk.

A blob is a row in `blobs` plus 1 MiB rows in `blob_chunks`. Writers append chunks in short
transactions (never holding the SQLite writer for a whole upload) and mark the blob complete
in the same transaction that makes it visible (e.g. inserts its `files` row). Incomplete blobs
left by a crash are reclaimed by `reclaim_abandoned`. The interface is small on purpose: an
S3-compatible store can implement the same four operations.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

from sqlalchemy import delete, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from batchgate.services.common.db.engine import Database
from batchgate.services.common.db.schema import blob_chunks, blobs
from batchgate.services.common.ids import new_id

CHUNK_BYTES = 1024 * 1024
READ_AHEAD_CHUNKS = 4
_CLEANUPS: set[asyncio.Future[None]] = set()  # aborts under way, whose callers were cancelled


class BlobWriter:
    """Appends bytes to a new blob; call `finish(conn)` inside the transaction that publishes it."""

    def __init__(self, db: Database, owner: str) -> None:
        self._db = db
        self.owner = owner
        self.blob_id = new_id("blob_")
        self.size = 0
        self._seq = 0
        self._buffer = bytearray()
        self._created = False

    async def _ensure_row(self, conn: AsyncConnection) -> None:
        if not self._created:
            await conn.execute(
                insert(blobs).values(
                    id=self.blob_id, owner=self.owner, complete=False, created_at=time.time()
                )
            )
            self._created = True

    async def write(self, data: bytes) -> None:
        self._buffer += data
        self.size += len(data)
        if len(self._buffer) >= CHUNK_BYTES:
            await self._flush(final=False)

    async def flush(self) -> None:
        """Store everything written so far, still incomplete (so it can be read back before
        `finish` publishes it; a crash leaves it to `reclaim_abandoned`)."""
        if self._buffer or not self._created:
            await self._flush(final=True)

    async def _flush(self, final: bool) -> None:
        rows = []
        view = memoryview(self._buffer)
        start = 0
        while len(view) - start >= CHUNK_BYTES or (final and start < len(view)):
            rows.append(
                {"blob_id": self.blob_id, "seq": self._seq, "data": bytes(view[start : start + CHUNK_BYTES])}
            )
            self._seq += 1
            start += CHUNK_BYTES
        view.release()
        del self._buffer[:start]
        async with self._db.write() as conn:
            await self._ensure_row(conn)
            if rows:
                await conn.execute(insert(blob_chunks), rows)

    async def finish(self, conn: AsyncConnection) -> str:
        """Write what is buffered and mark the blob complete, in the caller's transaction."""
        await self._ensure_row(conn)
        if self._buffer:
            await conn.execute(
                insert(blob_chunks).values(blob_id=self.blob_id, seq=self._seq, data=bytes(self._buffer))
            )
            self._seq += 1
            self._buffer.clear()
        await conn.execute(
            update(blobs).where(blobs.c.id == self.blob_id).values(complete=True, size=self.size)
        )
        return self.blob_id

    async def abort(self) -> None:
        """Drop everything written so far (the upload failed or was refused).

        It runs to its end even when the caller is cancelled meanwhile: gRPC cancels an upload's
        handler when its client goes away, often while the handler is already cleaning up, and an
        abort cut short leaves the chunks for `reclaim_abandoned`, hours later. A blob whose
        `finish` transaction committed is kept: a task cancelled while awaiting that commit sees
        the error after the blob was published, and what published it owns it.
        """
        self._buffer.clear()
        if self._created:
            cleanup = asyncio.ensure_future(self._drop_unpublished())
            _CLEANUPS.add(cleanup)  # the loop keeps only weak references to tasks
            cleanup.add_done_callback(_CLEANUPS.discard)
            await asyncio.shield(cleanup)

    async def _drop_unpublished(self) -> None:
        async with self._db.write() as conn:
            published = await conn.scalar(select(blobs.c.complete).where(blobs.c.id == self.blob_id))
            if not published:
                await delete_blob(conn, self.blob_id)


async def read_blob(db: Database, blob_id: str) -> AsyncIterator[bytes]:
    """Yield the blob's chunks in order, a few at a time (flat memory for any size)."""
    seq = 0
    while True:
        async with db.read() as conn:
            rows = (
                await conn.execute(
                    select(blob_chunks.c.seq, blob_chunks.c.data)
                    .where(blob_chunks.c.blob_id == blob_id, blob_chunks.c.seq >= seq)
                    .order_by(blob_chunks.c.seq)
                    .limit(READ_AHEAD_CHUNKS)
                )
            ).all()
        for row in rows:
            yield row.data
        if len(rows) < READ_AHEAD_CHUNKS:
            return
        seq = rows[-1].seq + 1


async def read_lines(db: Database, blob_id: str) -> AsyncIterator[bytes]:
    """Yield the blob's lines without their line ending (`\\n` or `\\r\\n`); the last may be empty."""
    tail = b""
    async for chunk in read_blob(db, blob_id):
        data = tail + chunk
        lines = data.split(b"\n")
        tail = lines.pop()
        for line in lines:
            yield line[:-1] if line.endswith(b"\r") else line
    if tail:
        yield tail[:-1] if tail.endswith(b"\r") else tail


async def delete_blob(conn: AsyncConnection, blob_id: str) -> None:
    await conn.execute(delete(blob_chunks).where(blob_chunks.c.blob_id == blob_id))
    await conn.execute(delete(blobs).where(blobs.c.id == blob_id))


async def reclaim_abandoned(db: Database, older_than_s: float, owner_prefix: str = "") -> int:
    """Delete incomplete blobs older than `older_than_s` (writers that crashed). Returns the count."""
    cutoff = time.time() - older_than_s
    async with db.read() as conn:
        query = select(blobs.c.id).where(blobs.c.complete.is_(False), blobs.c.created_at < cutoff)
        if owner_prefix:
            query = query.where(blobs.c.owner.startswith(owner_prefix))
        ids = (await conn.execute(query)).scalars().all()
    for blob_id in ids:
        async with db.write() as conn:
            await delete_blob(conn, blob_id)
    return len(ids)


async def reclaim_owned(db: Database, owner: str) -> int:
    """Delete incomplete blobs of one writer (e.g. a finalize that crashed and restarts)."""
    async with db.write() as conn:
        ids = (
            (
                await conn.execute(
                    select(blobs.c.id).where(blobs.c.owner == owner, blobs.c.complete.is_(False))
                )
            )
            .scalars()
            .all()
        )
        for blob_id in ids:
            await delete_blob(conn, blob_id)
    return len(ids)
