"""A fake Anthropic Message Batches provider: a real aiohttp server on loopback, on its own
thread and event loop, for native-batch tests.

    with FakeAnthropicBatches(polls_to_end=2, fail_creates=1) as fake:
        ... point an anthropic provider's base_url at fake.base_url ...
        fake.batches                 # every batch created, with its requests and how it ended

A batch ends after `polls_to_end` status reads (each request answered with a Message whose text
echoes its first user message), or, once cancelled, at the next read with every request
`canceled`. A request whose text contains `please-error` ends `errored`, one containing
`please-expire` ends `expired`; a batch holding a `please-wait` request ends only once
cancelled. The first `fail_creates` creates are answered 529 (overloaded).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson
from aiohttp import web

from tests.loopback import LoopbackServer

API_KEY = "fake-anthropic-key"


@dataclass
class FakeBatch:
    id: str
    requests: list[dict[str, Any]]
    created_at: str
    polls: int = 0
    cancelled: bool = False
    ended: bool = False


def _text(params: dict[str, Any]) -> str:
    content = params["messages"][0]["content"]
    return content if isinstance(content, str) else " ".join(b.get("text", "") for b in content)


def _result(request: dict[str, Any], cancelled: bool) -> dict[str, Any]:
    text = _text(request["params"])
    if cancelled:
        outcome: dict[str, Any] = {"type": "canceled"}
    elif "please-error" in text:
        outcome = {
            "type": "errored",
            "error": {"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}},
        }
    elif "please-expire" in text:
        outcome = {"type": "expired"}
    else:
        message = {
            "id": f"msg_{request['custom_id']}",
            "type": "message",
            "role": "assistant",
            "model": request["params"]["model"],
            "content": [{"type": "text", "text": f"echo: {text}"}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 10, "output_tokens": 5},
        }
        outcome = {"type": "succeeded", "message": message}
    return {"custom_id": request["custom_id"], "result": outcome}


@dataclass
class FakeAnthropicBatches:
    polls_to_end: int = 2
    fail_creates: int = 0
    batches: list[FakeBatch] = field(default_factory=list)
    create_calls: int = 0
    _ids: Any = field(default_factory=lambda: itertools.count(1))
    _port: int = 0
    _server: LoopbackServer | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._port}/v1"

    def _view(self, batch: FakeBatch) -> dict[str, Any]:
        ended = batch.ended
        results = [_result(r, batch.cancelled) for r in batch.requests] if ended else []
        kinds = [r["result"]["type"] for r in results]
        return {
            "id": batch.id,
            "type": "message_batch",
            "processing_status": "ended" if ended else ("canceling" if batch.cancelled else "in_progress"),
            "request_counts": {
                "processing": 0 if ended else len(batch.requests),
                "succeeded": kinds.count("succeeded"),
                "errored": kinds.count("errored"),
                "canceled": kinds.count("canceled"),
                "expired": kinds.count("expired"),
            },
            "created_at": batch.created_at,
            "cancel_initiated_at": batch.created_at if batch.cancelled else None,
            "results_url": f"http://127.0.0.1:{self._port}/results/{batch.id}" if ended else None,
        }

    def _find(self, request: web.Request) -> FakeBatch:
        if request.headers.get("x-api-key") != API_KEY or not request.headers.get("anthropic-version"):
            raise web.HTTPUnauthorized()
        batch = next((b for b in self.batches if b.id == request.match_info["id"]), None)
        if batch is None:
            raise web.HTTPNotFound()
        return batch

    async def _create(self, request: web.Request) -> web.Response:
        if request.headers.get("x-api-key") != API_KEY:
            raise web.HTTPUnauthorized()
        self.create_calls += 1
        if self.create_calls <= self.fail_creates:
            return web.json_response({"type": "error", "error": {"type": "overloaded_error"}}, status=529)
        body = orjson.loads(await request.read())
        stamp = datetime.now(UTC).isoformat().replace("+00:00", "Z")
        batch = FakeBatch(f"msgbatch_{next(self._ids):04d}", body["requests"], stamp)
        self.batches.append(batch)
        return web.json_response(self._view(batch))

    async def _list(self, request: web.Request) -> web.Response:
        data = [self._view(b) for b in reversed(self.batches)]
        return web.json_response({"data": data, "has_more": False})

    async def _get(self, request: web.Request) -> web.Response:
        batch = self._find(request)
        batch.polls += 1
        waits = any("please-wait" in _text(r["params"]) for r in batch.requests)
        if batch.cancelled or (batch.polls >= self.polls_to_end and not waits):
            batch.ended = True
        return web.json_response(self._view(batch))

    async def _cancel(self, request: web.Request) -> web.Response:
        batch = self._find(request)
        if not batch.ended:
            batch.cancelled = True
        return web.json_response(self._view(batch))

    async def _results(self, request: web.Request) -> web.Response:
        batch = self._find(request)
        lines = b"\n".join(orjson.dumps(_result(r, batch.cancelled)) for r in batch.requests)
        return web.Response(body=lines + b"\n", content_type="application/binary")

    def __enter__(self) -> FakeAnthropicBatches:
        app = web.Application()
        app.router.add_post("/v1/messages/batches", self._create)
        app.router.add_get("/v1/messages/batches", self._list)
        app.router.add_get("/v1/messages/batches/{id}", self._get)
        app.router.add_post("/v1/messages/batches/{id}/cancel", self._cancel)
        app.router.add_get("/results/{id}", self._results)
        self._server = LoopbackServer(app, "the fake Anthropic batches provider")
        self._port = self._server.port
        self._server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.stop()
