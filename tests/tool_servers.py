"""Tool servers for tool-calling tests and benchmarks, real HTTP servers on loopback, each on
its own thread and event loop:

- `HttpToolServer`: batchgate's HTTP tool protocol (aiohttp). How it answers is chosen per
  record by `context.mode`: `ok` (default), `status:<code>`, `fail_at:<round>` (HTTP 500 in that
  round), `slow` (sleeps `slow_s`), `malformed` (no `results` list) or `missing` (no result for
  the last call). Every request is kept
  (`requests()`: headers and body) to prove what batchgate sent.
- `McpToolServer`: a Model Context Protocol server built with the `mcp` SDK (its low-level
  `Server` and Streamable HTTP app under uvicorn), stateful (SSE answers) or stateless (JSON
  answers). Tools: `lookup` (text content naming its arguments), `broken` (a result with
  `isError: true`) and `explode` (a JSON-RPC error). In front of the SDK's app, a small ASGI
  layer keeps every request (method, headers, JSON-RPC body), answers 401 unless the
  `Authorization` header is `token` (when set), and with `refuse_initialize` answers 405 to
  `initialize`, as a server without the handshake does.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types
import orjson
import uvicorn
from aiohttp import web
from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPError

from tests.support import free_port


@dataclass(frozen=True)
class SeenRequest:
    method: str
    headers: dict[str, str]
    body: Any
    at: float


def _http_results(mode: str, calls: list[dict[str, Any]]) -> tuple[int, Any]:
    if mode.startswith("status:"):
        return int(mode.split(":", 1)[1]), {"error": "simulated"}
    if mode.startswith("fail_at:"):  # HTTP 500 in the named round (the simulator's arguments say which)
        rounds = {orjson.loads(c["function"]["arguments"]).get("round") for c in calls}
        if int(mode.split(":", 1)[1]) in rounds:
            return 500, {"error": "simulated"}
    if mode == "malformed":
        return 200, {"answers": []}
    results = [
        {"tool_call_id": c["id"], "content": f"{c['function']['name']}{c['function']['arguments']} -> ok"}
        for c in calls
    ]
    return 200, {"results": results[:-1] if mode == "missing" else results}


@dataclass
class HttpToolServer:
    slow_s: float = 3.0
    _requests: list[SeenRequest] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    port: int = 0
    _ready: threading.Event = field(default_factory=threading.Event)
    _stop: asyncio.Event | None = None
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/tools"

    def requests(self) -> list[SeenRequest]:
        with self._lock:
            return list(self._requests)

    async def _handle(self, request: web.Request) -> web.Response:
        body = orjson.loads(await request.read())
        with self._lock:
            self._requests.append(
                SeenRequest("POST", {k.lower(): v for k, v in request.headers.items()}, body, time.time())
            )
        context = body.get("context") if isinstance(body.get("context"), dict) else {}
        mode = str(context.get("mode", "ok"))
        if mode == "slow":
            await asyncio.sleep(self.slow_s)
        status, answer = _http_results(mode, body.get("tool_calls") or [])
        return web.Response(status=status, body=orjson.dumps(answer), content_type="application/json")

    async def _serve(self) -> None:
        app = web.Application()
        app.router.add_post("/tools", self._handle)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", self.port).start()
        self._stop = asyncio.Event()
        self._ready.set()
        await self._stop.wait()
        await runner.cleanup()

    def __enter__(self) -> HttpToolServer:
        self.port = free_port()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_until_complete, args=(self._serve(),), daemon=True
        )
        self._thread.start()
        assert self._ready.wait(10)
        return self

    def __exit__(self, *_exc: object) -> None:
        assert self._loop is not None and self._stop is not None and self._thread is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)


TOOLS = [
    types.Tool(name="lookup", description="Look a row up.", input_schema={"type": "object"}),
    types.Tool(name="broken", description="Always reports an error.", input_schema={"type": "object"}),
    types.Tool(name="explode", description="Fails at the protocol level.", input_schema={"type": "object"}),
]


async def _list_tools(_ctx: Any, _params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


async def _call_tool(_ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    arguments = params.arguments or {}
    if params.name == "broken":
        text = types.TextContent(text="no such row")
        return types.CallToolResult(content=[text], is_error=True)
    if params.name == "explode":
        raise MCPError(-32000, "the lookup backend is down")
    seen = orjson.dumps(arguments, option=orjson.OPT_SORT_KEYS).decode()
    return types.CallToolResult(content=[types.TextContent(text="lookup "), types.TextContent(text=seen)])


@dataclass
class McpToolServer:
    stateless: bool = False
    token: str | None = None
    refuse_initialize: bool = False
    _requests: list[SeenRequest] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    port: int = 0
    _server: uvicorn.Server | None = None
    _thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def requests(self) -> list[SeenRequest]:
        with self._lock:
            return list(self._requests)

    def _front(self, app: Any) -> Any:
        """Keeps each request and answers 401 / 405 before the SDK's app, as configured."""

        async def front(scope: dict[str, Any], receive: Any, send: Any) -> None:
            if scope["type"] != "http":
                return await app(scope, receive, send)
            chunks = []
            while True:
                message = await receive()
                chunks.append(message.get("body", b""))
                if not message.get("more_body"):
                    break
            raw = b"".join(chunks)
            headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
            body = orjson.loads(raw) if raw else None
            with self._lock:
                self._requests.append(SeenRequest(scope["method"], headers, body, time.time()))
            refused = 0
            if self.token is not None and headers.get("authorization") != self.token:
                refused = 401
            elif self.refuse_initialize and isinstance(body, dict) and body.get("method") == "initialize":
                refused = 405
            if refused:
                await send({"type": "http.response.start", "status": refused, "headers": []})
                return await send({"type": "http.response.body", "body": b""})
            replayed = False

            async def replay() -> dict[str, Any]:
                nonlocal replayed
                if replayed:
                    return await receive()
                replayed = True
                return {"type": "http.request", "body": raw, "more_body": False}

            return await app(scope, replay, send)

        return front

    def __enter__(self) -> McpToolServer:
        self.port = free_port()
        server = Server("batchgate-test-tools", on_list_tools=_list_tools, on_call_tool=_call_tool)
        app = server.streamable_http_app(json_response=self.stateless, stateless_http=self.stateless)
        config = uvicorn.Config(
            self._front(app), host="127.0.0.1", port=self.port, log_level="warning", lifespan="on"
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 15
        while not self._server.started:
            assert time.monotonic() < deadline, "the MCP server did not start"
            time.sleep(0.02)
        return self

    def __exit__(self, *_exc: object) -> None:
        assert self._server is not None and self._thread is not None
        self._server.should_exit = True
        self._thread.join(10)


@contextlib.contextmanager
def tool_servers() -> Iterator[dict[str, Any]]:
    """One of each: HTTP, MCP stateful (SSE), MCP stateless (JSON), MCP behind a token, MCP
    without the initialize handshake."""
    with (
        HttpToolServer() as http,
        McpToolServer() as stateful,
        McpToolServer(stateless=True) as stateless,
        McpToolServer(token="Bearer mcp-secret") as guarded,
        McpToolServer(stateless=True, refuse_initialize=True) as bare,
    ):
        yield {"http": http, "stateful": stateful, "stateless": stateless, "guarded": guarded, "bare": bare}
