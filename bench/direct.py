"""Baseline A: the simplest correct direct client a user would write instead of batchgate.

Read the JSONL, post every request to the upstream with at most `concurrency` in flight,
write one result line per request. The baseline issue 16 names is plain asyncio + aiohttp
(`transport="aiohttp"`): one `ClientSession` with a connection pool as large as the
semaphore, the fastest Python HTTP client measured here (shared/reference/http-client.md).
The httpx variants stay as extra rows: httpx's own pool (`"httpx"`) slows down with many
requests in flight, and httpx over aiohttp's transport (`"httpx+aiohttp"`) is what
batchgate's executor used before.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import orjson
from httpx_aiohttp import AiohttpTransport

Post = Callable[[str, dict[str, Any]], Awaitable[tuple[int, Any]]]


async def run_direct(
    input_path: Path, output_path: Path, upstream_base: str, concurrency: int, transport: str = "aiohttp"
) -> int:
    """Send every request of `input_path` to `upstream_base` (…/v1); returns the number of answers."""
    if transport == "aiohttp":
        connector = aiohttp.TCPConnector(limit=concurrency)
        async with aiohttp.ClientSession(connector=connector) as session:

            async def post(url: str, body: dict[str, Any]) -> tuple[int, Any]:
                async with session.post(url, json=body) as response:
                    return response.status, await response.json(loads=orjson.loads)

            return await _run(input_path, output_path, upstream_base, concurrency, post)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    if transport == "httpx+aiohttp":
        client = httpx.AsyncClient(transport=AiohttpTransport(limits=limits), timeout=600)
    else:
        client = httpx.AsyncClient(limits=limits, timeout=600)
    async with client:

        async def post_httpx(url: str, body: dict[str, Any]) -> tuple[int, Any]:
            response = await client.post(url, json=body)
            return response.status_code, response.json()

        return await _run(input_path, output_path, upstream_base, concurrency, post_httpx)


async def _run(input_path: Path, output_path: Path, upstream_base: str, concurrency: int, post: Post) -> int:
    semaphore = asyncio.Semaphore(concurrency)

    async def one(record: dict[str, Any]) -> bytes:
        async with semaphore:
            status, body = await post(upstream_base + record["url"].removeprefix("/v1"), record["body"])
        return orjson.dumps(
            {"custom_id": record["custom_id"], "response": {"status_code": status, "body": body}}
        )

    raw = await asyncio.to_thread(input_path.read_bytes)
    records = [orjson.loads(line) for line in raw.splitlines() if line.strip()]
    lines = await asyncio.gather(*(one(r) for r in records))
    await asyncio.to_thread(output_path.write_bytes, b"\n".join(lines) + b"\n")
    return len(lines)
