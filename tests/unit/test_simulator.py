"""The simulated upstream remembers a bounded amount per call: the latest contents' counts and
calls, and per-body counts only where a body asks for a status some number of `times`."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiohttp.test_utils import TestClient, TestServer

from batchgate import simulator
from batchgate.simulator import SimulatorOptions, build_app


@pytest.fixture
async def client(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[TestClient]:
    monkeypatch.setattr(simulator, "CONTENT_COUNTS_MAX", 3)
    monkeypatch.setattr(simulator, "CALL_LOG_MAX", 4)
    async with TestClient(TestServer(build_app(SimulatorOptions(latency_ms=0)))) as test_client:
        yield test_client


async def _chat(client: TestClient, content: str, **x_sim: object) -> int:
    body: dict[str, object] = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": content}]}
    if x_sim:
        body["x_sim"] = x_sim
    answer = await client.post("/v1/chat/completions", json=body)
    return answer.status


async def test_content_counts_and_the_call_log_keep_the_latest(client: TestClient) -> None:
    for content in ("a", "b", "a", "c", "d"):
        assert await _chat(client, content) == 200
    stats = await (await client.get("/_sim/stats")).json()
    assert stats["requests"] == 5
    assert stats["by_content"] == {"a": 2, "c": 1, "d": 1}  # "b", counted longest ago, left
    calls = await (await client.get("/_sim/calls")).json()
    assert [c["content"] for c in calls] == ["b", "a", "c", "d"]


async def test_a_status_asked_for_a_number_of_times_is_still_counted(client: TestClient) -> None:
    assert [await _chat(client, "flaky", status=503, times=2) for _ in range(3)] == [503, 503, 200]
    for content in ("x", "y", "z", "w"):  # other contents do not make it forget the body
        await _chat(client, content)
    assert await _chat(client, "flaky", status=503, times=2) == 200
