"""Baseline A: the simplest correct direct client a user would write instead of batchgate.

asyncio + httpx with a semaphore: read the JSONL, post every request to the upstream, write
one result line per request. `transport="aiohttp"` puts httpx's API over aiohttp (the
`httpx-aiohttp` transport batchgate's executor uses), since httpx's own pool is known to
slow down with many requests in flight (shared/reference/http-client.md).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import orjson
from httpx_aiohttp import AiohttpTransport


async def run_direct(
    input_path: Path, output_path: Path, upstream_base: str, concurrency: int, transport: str = "httpx"
) -> int:
    """Send every request of `input_path` to `upstream_base` (…/v1); returns the number of answers."""
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    if transport == "aiohttp":
        client = httpx.AsyncClient(transport=AiohttpTransport(limits=limits), timeout=600)
    else:
        client = httpx.AsyncClient(limits=limits, timeout=600)
    semaphore = asyncio.Semaphore(concurrency)

    async def one(record: dict) -> bytes:
        async with semaphore:
            response = await client.post(
                upstream_base + record["url"].removeprefix("/v1"), json=record["body"]
            )
            return orjson.dumps(
                {
                    "custom_id": record["custom_id"],
                    "response": {"status_code": response.status_code, "body": response.json()},
                }
            )

    async with client:
        raw = await asyncio.to_thread(input_path.read_bytes)
        records = [orjson.loads(line) for line in raw.splitlines() if line.strip()]
        lines = await asyncio.gather(*(one(r) for r in records))
    await asyncio.to_thread(output_path.write_bytes, b"\n".join(lines) + b"\n")
    return len(lines)
