"""An OpenAI-compatible upstream for execution tests and benchmarks that records when each call
STARTS: a real aiohttp server on loopback, run on its own thread and event loop.

    with FakeUpstream(latency_s=0.05, capacity=16) as upstream:   # 429 beyond 16 in flight
        ... point a provider's base_url at upstream.base_url ...
        calls = upstream.calls()                                     # every call, in start order

Each call is identified by its request's last message (`Call.content`; `records()` puts the
custom_id there, and `catalogue()` writes a provider config for fake upstreams). Options: a
fixed latency (plus `x_delay_ms` from the body), and a concurrency `capacity` beyond which
calls are answered 429 at once (with `Retry-After` when asked).
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import yaml
from aiohttp import web

from tests.loopback import LoopbackServer


def records(model: str, prefix: str, n: int, **body: Any) -> list[dict[str, Any]]:
    """n chat records `<prefix>-<i>` whose message is their custom_id (the upstream's `content`)."""
    return [
        {
            "custom_id": f"{prefix}-{i}",
            "method": "POST",
            "url": "/v1/chat/completions",
            "body": {"model": model, "messages": [{"role": "user", "content": f"{prefix}-{i}"}], **body},
        }
        for i in range(n)
    ]


def catalogue(path: Path, providers: dict[str, dict[str, Any]]) -> str:
    """A config file with one OpenAI-compatible provider per entry (its settings: `base_url`,
    `max_concurrency`, …) and a model of the same name on it; returns its path."""
    doc = {
        "providers": [{"name": name, **settings} for name, settings in providers.items()],
        "models": [{"name": name, "provider": name} for name in providers],
    }
    path.write_text(yaml.safe_dump(doc))
    return str(path)


@dataclass
class Call:
    content: str
    api_key: str
    started: float
    """time.time() when the request arrived."""
    status: int = 0
    """0 while it runs."""
    ended: float | None = None


@dataclass
class FakeUpstream:
    latency_s: float = 0.05
    capacity: int | None = None
    """Calls served at once; one more is answered 429 at once. None: no limit."""
    retry_after_s: float | None = None
    """`Retry-After` sent with the capacity 429s."""
    _calls: list[Call] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _in_flight: int = 0
    _port: int = 0
    _server: LoopbackServer | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._port}/v1"

    def calls(self) -> list[Call]:
        """Every call so far, in start order (copies)."""
        with self._lock:
            return [Call(c.content, c.api_key, c.started, c.status, c.ended) for c in self._calls]

    async def _handle(self, request: web.Request) -> web.Response:
        body = orjson.loads(await request.read())
        content = str(body["messages"][-1]["content"])
        api_key = request.headers.get("authorization", "").removeprefix("Bearer ")
        call = Call(content, api_key, time.time())
        with self._lock:
            self._calls.append(call)
        try:
            return await self._answer(call, body)
        finally:
            call.ended = time.time()

    async def _answer(self, call: Call, body: dict[str, Any]) -> web.Response:
        if self.capacity is not None and self._in_flight >= self.capacity:
            headers = {} if self.retry_after_s is None else {"retry-after": f"{self.retry_after_s:g}"}
            return self._reply(call, 429, headers)
        self._in_flight += 1
        try:
            await asyncio.sleep(self.latency_s + float(body.get("x_delay_ms", 0)) / 1000)
        finally:
            self._in_flight -= 1
        return self._reply(call, 200, {})

    @staticmethod
    def _reply(call: Call, status: int, headers: dict[str, str]) -> web.Response:
        call.status = status
        if status == 200:
            payload: dict[str, Any] = {
                "id": "chatcmpl-fake",
                "object": "chat.completion",
                "created": 1767225600,
                "model": "fake",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": f"answer to {call.content}"},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
            }
        else:
            payload = {"error": {"message": "Too many requests.", "type": "rate_limit_error", "code": None}}
        return web.Response(
            status=status, body=orjson.dumps(payload), content_type="application/json", headers=headers
        )

    def __enter__(self) -> FakeUpstream:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._handle)
        self._server = LoopbackServer(app, "the fake upstream")
        self._port = self._server.port
        self._server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.stop()
