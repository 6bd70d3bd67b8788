"""`batchgate simulate`: a real HTTP server that answers like an LLM provider, deterministically.

Serves OpenAI's `/v1/chat/completions`, `/v1/completions`, `/v1/embeddings`, `/v1/responses`
and Anthropic's `/v1/messages`. The same request always gets the same answer. Latency and
random failure rates are flags; tests steer single requests with an `x_sim` object in the
body (a real provider would reject it; batchgate passes bodies through unchanged, and its
Anthropic translation passes unknown keys through too):

    "x_sim": {"status": 503, "times": 2, "retry_after": 1,   # first 2 calls answer 503
              "headers": {"x-ratelimit-remaining-requests": "0"},  # ... with these headers too
              "keys": ["k1"],                                  # ... only calls made with these keys
              "delay_ms": 500,                                 # extra latency for this request
              "fail_models": ["gpt-4o"],                       # these models always answer 503
              "echo": true,                                    # answer text = the request body seen
              "usage": {"cache_read_input_tokens": 3},         # merged into the answer's usage
              "stop_reason": "max_tokens",                     # /v1/messages: this stop reason
              "tool_rounds": 3, "tool_calls": 2}               # chat with `tools`: ask for 2 calls
                                                               # a turn until 3 tool rounds ran

`/v1/messages` wants Anthropic's headers (`x-api-key`, `anthropic-version`) and answers with a
`tool_use` block when tools are offered and the last turn is not a tool result (unless
`tool_choice` is none). Chat completions ask for tools only when `x_sim.tool_rounds` says so:
the answer then calls the first offered tool (`finish_reason: "tool_calls"`) while the
conversation holds fewer tool-calling assistant turns than that, and answers as usual after.
`GET /_sim/stats` reports how many calls each request content received
(tests use it to prove that finished items are not re-run); `GET /_sim/calls?content=…` lists
the calls for one content in order (time, status, model, API key).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter, deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

from batchgate import simulated_answers as answers

# What the simulator remembers for the tests that read it back is bounded: over a million
# calls its per-call counters grew by ~330 MiB. The call log keeps the latest calls, the
# per-content counts the latest contents (a test asks about its own few), and the per-body
# counts only bodies that ask for a status a number of `times`, the one reader of them.
CALL_LOG_MAX = 10_000
CONTENT_COUNTS_MAX = 50_000
# On stop, calls still being answered get this long, not aiohttp's 60 s: a test's slow answers
# (`x_sim` delays) kept every stack's teardown waiting until the launcher killed the
# simulator, 20 s later. The executor sees a closed connection, as from a restarting server.
STOP_GRACE_S = 0.5


@dataclass
class SimulatorOptions:
    latency_ms: float = 20.0
    error_rate: float = 0.0  # share of calls answered 500
    rate_limit_rate: float = 0.0  # share of calls answered 429 with Retry-After: 1
    seed: int = 0
    embedding_dimensions: int = 16


@dataclass
class _State:
    options: SimulatorOptions
    rng: random.Random
    calls_by_key: Counter[str] = field(default_factory=Counter)
    """Calls per body digest, for bodies whose `x_sim` asks for a status (`times`)."""
    calls_by_content: Counter[str] = field(default_factory=Counter)
    """Calls per content key, the latest CONTENT_COUNTS_MAX keys (a key counted again moves
    to the end)."""
    calls_by_status: Counter[int] = field(default_factory=Counter)
    calls: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=CALL_LOG_MAX))
    total: int = 0


def _api_key(request: web.Request) -> str:
    bearer = request.headers.get("authorization", "")
    return request.headers.get("x-api-key") or bearer.removeprefix("Bearer ").strip()


_ANSWERS: dict[str, Callable[[dict[str, Any], str, str, SimulatorOptions], dict[str, Any]]] = {
    "chat": lambda body, key, digest, _o: answers.chat(body, key, digest),
    "completions": lambda body, key, digest, _o: answers.completion(body, key, digest),
    "embeddings": lambda body, key, digest, o: answers.embeddings(body, key, digest, o.embedding_dimensions),
    "responses": lambda body, key, digest, _o: answers.responses(body, key, digest),
    "messages": lambda body, key, digest, _o: answers.messages(body, key, digest),
}


class _Simulator:
    """The simulated upstream's handlers over its counters (`_State`)."""

    def __init__(self, options: SimulatorOptions) -> None:
        self.options = options
        self.state = _State(options=options, rng=random.Random(options.seed))

    def respond(
        self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None
    ) -> web.Response:
        self.state.calls_by_status[status] += 1
        return web.Response(
            status=status,
            body=orjson.dumps(payload),
            content_type="application/json",
            headers={"x-request-id": f"req_sim_{self.state.total}", **(headers or {})},
        )

    def handler(self, kind: str) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def handle(request: web.Request) -> web.Response:
            return await self.handle(kind, request)

        return handle

    async def handle(self, kind: str, request: web.Request) -> web.Response:
        state = self.state
        error = answers.anthropic_error if kind == "messages" else answers.openai_error
        raw = await request.read()
        state.total += 1
        api_key = _api_key(request)
        try:
            body = orjson.loads(raw)
            assert isinstance(body, dict)
        except (orjson.JSONDecodeError, AssertionError):
            return self.respond(400, error(400, "The body must be a JSON object."))
        key = answers.content_key(body)
        self._count_content(key)
        call = {"content": key, "model": body.get("model"), "api_key": api_key, "at": time.time()}
        state.calls.append(call)  # its status is added when it answers
        digest = answers.sha256_hex(raw)
        x_sim = body.get("x_sim")
        sim: dict[str, Any] = x_sim if isinstance(x_sim, dict) else {}
        if sim.get("status"):
            state.calls_by_key[digest] += 1
        delay = self.options.latency_ms + float(sim.get("delay_ms", 0))
        if delay > 0:
            await asyncio.sleep(delay / 1000)
        refusal = self._refusal(kind, request, body, sim, api_key, digest)
        if refusal is not None:
            status, message, headers = refusal
            answer, answer_headers = error(status, message), headers
        else:
            status, answer_headers = 200, None
            answer = _ANSWERS[kind](body, key, digest, self.options)
            if kind == "chat":
                answers.ask_for_tools(answer, sim, body, digest)
            answer = answers.steer(answer, sim, body)
        call["status"] = status
        return self.respond(status, answer, answer_headers)

    def _count_content(self, key: str) -> None:
        counts = self.state.calls_by_content
        counts[key] = counts.pop(key, 0) + 1
        if len(counts) > CONTENT_COUNTS_MAX:
            del counts[next(iter(counts))]  # the key counted longest ago

    def _refusal(
        self,
        kind: str,
        request: web.Request,
        body: dict[str, Any],
        sim: dict[str, Any],
        api_key: str,
        digest: str,
    ) -> tuple[int, str, dict[str, str] | None] | None:
        """(status, message, headers) of the error this call gets, if any: a missing Anthropic
        header, a model made to fail, a status asked for in `x_sim`, or the random ones."""
        if kind == "messages" and not request.headers.get("x-api-key"):
            return 401, "x-api-key header is required.", None
        if kind == "messages" and not request.headers.get("anthropic-version"):
            return 400, "anthropic-version header is required.", None
        if body.get("model") in (sim.get("fail_models") or ()):
            return 503, f"Model {body.get('model')} is unavailable (simulated).", None
        status = sim.get("status")
        keyed = "keys" not in sim or api_key in sim["keys"]
        if status and keyed and self.state.calls_by_key[digest] <= int(sim.get("times", 1_000_000)):
            headers = {"retry-after": str(sim["retry_after"])} if "retry_after" in sim else {}
            headers.update({str(k): str(v) for k, v in (sim.get("headers") or {}).items()})
            return int(status), f"Simulated HTTP {status}.", headers
        roll = self.state.rng.random()
        if roll < self.options.rate_limit_rate:
            return 429, "Rate limit reached (simulated).", {"retry-after": "1"}
        if roll < self.options.rate_limit_rate + self.options.error_rate:
            return 500, "Internal error (simulated).", None
        return None

    async def stats(self, _request: web.Request) -> web.Response:
        state = self.state
        return web.Response(
            body=orjson.dumps(
                {
                    "requests": state.total,
                    "by_status": {str(k): v for k, v in state.calls_by_status.items()},
                    "by_content": dict(state.calls_by_content),
                }
            ),
            content_type="application/json",
        )

    async def calls(self, request: web.Request) -> web.Response:
        content = request.query.get("content")
        listed = [c for c in self.state.calls if content is None or c["content"] == content]
        return web.Response(body=orjson.dumps(listed), content_type="application/json")


async def _health(_request: web.Request) -> web.Response:
    return web.Response(text="ok")


def build_app(options: SimulatorOptions) -> web.Application:
    sim = _Simulator(options)
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/v1/chat/completions", sim.handler("chat"))
    app.router.add_post("/v1/completions", sim.handler("completions"))
    app.router.add_post("/v1/embeddings", sim.handler("embeddings"))
    app.router.add_post("/v1/responses", sim.handler("responses"))
    app.router.add_post("/v1/messages", sim.handler("messages"))
    app.router.add_get("/_sim/stats", sim.stats)
    app.router.add_get("/_sim/calls", sim.calls)
    app.router.add_get("/healthz", _health)
    return app


async def serve(host: str, port: int, options: SimulatorOptions, stop: asyncio.Event | None = None) -> None:
    runner = web.AppRunner(build_app(options), access_log=None, shutdown_timeout=STOP_GRACE_S)
    await runner.setup()
    site = web.TCPSite(runner, host, port, backlog=1024)
    await site.start()
    try:
        await (stop or asyncio.Event()).wait()
    finally:
        await runner.cleanup()
