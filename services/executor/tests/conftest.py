"""The simulated upstream (`batchgate simulate`'s server) on a loopback port, one per test module."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest

from batchgate.simulator import SimulatorOptions, serve
from tests.support import free_port


@pytest.fixture(scope="module")
async def simulator() -> AsyncIterator[str]:
    port = free_port()
    stop = asyncio.Event()
    task = asyncio.create_task(serve("127.0.0.1", port, SimulatorOptions(latency_ms=0), stop))
    base = f"http://127.0.0.1:{port}"
    async with httpx.AsyncClient() as client:
        for _ in range(100):
            try:
                await client.get(f"{base}/healthz")
                break
            except httpx.HTTPError:
                await asyncio.sleep(0.05)
    yield base
    stop.set()
    await task
