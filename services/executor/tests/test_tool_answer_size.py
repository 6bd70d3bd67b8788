"""The size limit on what a tool server, an MCP server or a workflow callback answers (8 MiB):
every answer up to it arrives whole, however the server sends it (one body with a
Content-Length, or chunked), and one past it fails the call by name without being read to its
end. A real aiohttp server on loopback answers; the transport is called directly, then the item
runner drives each of the three kinds over the simulated upstream."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
from aiohttp import web

from batchgate.internal.v1 import items_pb2, recorder_pb2, scheduler_pb2
from batchgate.services.common.catalogue import ModelConfig, ProviderConfig
from batchgate.services.common.config import Settings
from batchgate.services.common.loading import load_settings
from batchgate.services.executor.runner import ItemRunner
from batchgate.services.executor.tools.calls import ToolFailure
from batchgate.services.executor.tools.transport import MAX_ANSWER_BYTES, ToolTransport
from tests.support import free_port

MIB = 1024 * 1024
CHUNK = 64 * 1024
_numbers = itertools.count()


def padded(size: int) -> bytes:
    """A JSON object of exactly `size` bytes."""
    return b'{"pad":"' + b"x" * (size - 10) + b'"}'


async def _chunked(request: web.Request, parts: AsyncIterator[bytes]) -> web.StreamResponse:
    response = web.StreamResponse(headers={"content-type": "application/json"})
    response.enable_chunked_encoding()
    await response.prepare(request)
    async for part in parts:
        await response.write(part)
    await response.write_eof()
    return response


async def _pieces(body: bytes) -> AsyncIterator[bytes]:
    for start in range(0, len(body), CHUNK):
        yield body[start : start + CHUNK]


async def _endless() -> AsyncIterator[bytes]:
    yield b'{"pad":"'
    while True:
        yield b"x" * CHUNK


async def _json(request: web.Request) -> web.Response:
    return web.Response(body=padded(int(request.match_info["size"])), content_type="application/json")


async def _json_chunked(request: web.Request) -> web.StreamResponse:
    return await _chunked(request, _pieces(padded(int(request.match_info["size"]))))


async def _json_endless(request: web.Request) -> web.StreamResponse:
    return await _chunked(request, _endless())


async def _tools(request: web.Request) -> web.Response:
    """batchgate's HTTP tool protocol: every call's result is `size` characters."""
    calls = (await request.json())["tool_calls"]
    text = "t" * int(request.match_info["size"])
    results = [{"tool_call_id": c["id"], "content": text} for c in calls]
    return web.Response(body=orjson.dumps({"results": results}), content_type="application/json")


async def _mcp(request: web.Request) -> web.Response:
    """A stateless MCP server (405 to `initialize`) whose `tools/call` result is `size`
    characters, as JSON or as an event stream."""
    message = await request.json()
    if message["method"] == "initialize":
        return web.Response(status=405)
    result = {"content": [{"type": "text", "text": "m" * int(request.match_info["size"])}]}
    answer = orjson.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result})
    if request.match_info["kind"] == "sse":
        return web.Response(
            body=b"event: message\ndata: " + answer + b"\n\n", content_type="text/event-stream"
        )
    return web.Response(body=answer, content_type="application/json")


async def _callback(request: web.Request) -> web.Response:
    """A workflow callback that completes at once, its output `size` characters."""
    output = {"pad": "c" * int(request.match_info["size"])}
    return web.Response(
        body=orjson.dumps({"status": "completed", "output": output}), content_type="application/json"
    )


@pytest.fixture(scope="module")
async def server() -> AsyncIterator[str]:
    app = web.Application()
    app.router.add_get("/json/{size}", _json)
    app.router.add_get("/chunked/{size}", _json_chunked)
    app.router.add_get("/endless", _json_endless)
    app.router.add_post("/tools/{size}", _tools)
    app.router.add_post("/mcp/{kind}/{size}", _mcp)
    app.router.add_post("/callback/{size}", _callback)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    yield f"http://127.0.0.1:{port}"
    await runner.cleanup()


def loopback_settings() -> Settings:
    return load_settings(environ={"BATCHGATE_TOOL_ALLOWED_NETWORKS": "127.0.0.0/8"})


async def fetch(url: str) -> bytes:
    transport = ToolTransport(loopback_settings())
    try:
        answer = await transport.send("GET", url, body=b"", headers={}, timeout_s=30, traced=False)
    finally:
        await transport.close()
    return answer.body


@pytest.mark.parametrize("how", ["json", "chunked"])
@pytest.mark.parametrize("size", [1000, 200_000, MIB, MAX_ANSWER_BYTES])
async def test_an_answer_up_to_the_limit_arrives_whole(server: str, how: str, size: int) -> None:
    body = await fetch(f"{server}/{how}/{size}")
    assert body == padded(size)


@pytest.mark.parametrize("path", ["json/8388609", "json/9437184", "chunked/9437184", "endless"])
async def test_an_answer_past_the_limit_fails_by_name(server: str, path: str) -> None:
    with pytest.raises(ToolFailure) as failed:
        await fetch(f"{server}/{path}")
    assert str(failed.value) == f"the answer of {server}/{path} is over 8 MiB"


def runner_settings(simulator: str) -> Settings:
    provider = ProviderConfig(name="oai", kind="openai", base_url=f"{simulator}/v1", api_keys=("k",))
    return dataclasses.replace(
        loopback_settings(), providers=(provider,), models=(ModelConfig(name="gpt-4o-mini", provider="oai"),)
    )


def leased(extension: dict[str, Any], **sim: Any) -> scheduler_pb2.LeasedItem:
    body = {
        "model": "gpt-4o-mini",
        "messages": [{"role": "user", "content": "large answers"}],
        "tools": [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}],
        "x_sim": {"usage": {"prompt_tokens": 10, "completion_tokens": 3}, **sim},
        "batchgate": extension,
    }
    return scheduler_pb2.LeasedItem(
        ref=items_pb2.ItemRef(batch_id="batch_sizes", index=next(_numbers), attempt=1),
        custom_id="rec-large",
        endpoint="/v1/chat/completions",
        model="gpt-4o-mini",
        body=orjson.dumps(body),
    )


async def run(simulator: str, item: scheduler_pb2.LeasedItem) -> recorder_pb2.Outcome:
    runner = ItemRunner(runner_settings(simulator))
    try:
        return await runner.run(item)
    finally:
        await runner.close()


def tools(url: str, **config: Any) -> dict[str, Any]:
    # max_tokens at its cap: a megabyte read back is ~350,000 tokens by the estimate
    return {
        "tool_config": {"url": url, "max_rounds": 2, "max_tokens": 2_000_000, "timeout_ms": 30_000, **config}
    }


@pytest.mark.parametrize("path", ["tools", "mcp/json", "mcp/sse"])
async def test_a_tool_answer_of_a_megabyte_reaches_the_model(simulator: str, server: str, path: str) -> None:
    kind = {"type": "mcp"} if path.startswith("mcp") else {}
    outcome = await run(simulator, leased(tools(f"{server}/{path}/{MIB}", **kind), tool_rounds=1, echo=True))
    assert outcome.state == recorder_pb2.OUTCOME_STATE_SUCCEEDED, outcome.error_message
    body = orjson.loads(outcome.response_body)
    assert body["batchgate"] == {"tool_rounds": 1}
    seen = orjson.loads(body["choices"][0]["message"]["content"])
    assert len(seen["messages"][-1]["content"]) == MIB


@pytest.mark.parametrize("path", ["tools", "mcp/json", "mcp/sse"])
async def test_a_tool_answer_past_the_limit_fails_the_record_naming_it(
    simulator: str, server: str, path: str
) -> None:
    url = f"{server}/{path}/{9 * MIB}"
    kind = {"type": "mcp"} if path.startswith("mcp") else {}
    outcome = await run(simulator, leased(tools(url, **kind), tool_rounds=1))
    assert outcome.error_code == "tool_execution_failed"
    assert outcome.error_message == f"Tool round 1 failed: the answer of {url} is over 8 MiB."


async def test_a_callback_answer_of_a_megabyte_completes_the_workflow(simulator: str, server: str) -> None:
    workflow = {"workflow": {"url": f"{server}/callback/{MIB}", "timeout_ms": 30_000}}
    outcome = await run(simulator, leased(workflow))
    assert outcome.state == recorder_pb2.OUTCOME_STATE_SUCCEEDED, outcome.error_message
    body = orjson.loads(outcome.response_body)
    assert len(body["output"]["pad"]) == MIB


async def test_a_callback_answer_past_the_limit_fails_the_workflow_naming_it(
    simulator: str, server: str
) -> None:
    url = f"{server}/callback/{9 * MIB}"
    outcome = await run(simulator, leased({"workflow": {"url": url, "timeout_ms": 30_000}}))
    assert outcome.error_code == "workflow_callback_failed"
    assert outcome.error_message == f"Workflow step 0: the answer of {url} is over 8 MiB (after 3 attempts)."
