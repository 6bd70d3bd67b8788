"""`batchgate simulate`: a real HTTP server that answers like an LLM provider, deterministically.

Serves OpenAI's `/v1/chat/completions`, `/v1/completions`, `/v1/embeddings`, `/v1/responses`
and Anthropic's `/v1/messages`. The same request always gets the same answer. Latency and
random failure rates are flags; tests steer single requests with an `x_sim` object in the
body (a real provider would reject it; batchgate passes bodies through unchanged):

    "x_sim": {"status": 503, "times": 2, "retry_after": 1,   # first 2 calls answer 503
              "delay_ms": 500,                                 # extra latency for this request
              "fail_models": ["gpt-4o"]}                       # these models always answer 503

`GET /_sim/stats` reports how many calls each request content received (tests use it to prove
that finished items are not re-run).
"""

from __future__ import annotations

import asyncio
import hashlib
import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

CREATED = 1_767_225_600  # fixed so answers are byte-identical across runs


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
    calls_by_content: Counter[str] = field(default_factory=Counter)
    calls_by_status: Counter[int] = field(default_factory=Counter)
    total: int = 0


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _content_key(body: dict[str, Any]) -> str:
    """What identifies a request for stats: its last message / input / prompt."""
    messages = body.get("messages")
    if isinstance(messages, list) and messages:
        last = messages[-1]
        content = last.get("content") if isinstance(last, dict) else last
        return content if isinstance(content, str) else orjson.dumps(content).decode()
    for key in ("input", "prompt"):
        if key in body:
            value = body[key]
            return value if isinstance(value, str) else orjson.dumps(value).decode()
    return ""


def _tokens(text: str) -> int:
    return max(1, len(text) // 4)


def _answer_text(key: str, model: str) -> str:
    digest = _digest(f"{model}:{key}".encode())[:12]
    return f"Simulated answer {digest} to: {key[:60]}"


def _openai_error(status: int, message: str) -> dict[str, Any]:
    kind = {
        400: "invalid_request_error",
        401: "authentication_error",
        404: "not_found_error",
        429: "rate_limit_error",
    }.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": message, "type": kind, "param": None, "code": f"sim_{status}"}}


def _anthropic_error(status: int, message: str) -> dict[str, Any]:
    kind = {
        400: "invalid_request_error",
        401: "authentication_error",
        404: "not_found_error",
        429: "rate_limit_error",
        529: "overloaded_error",
    }.get(status, "api_error")
    return {"type": "error", "error": {"type": kind, "message": message}}


def _chat(body: dict[str, Any], key: str, digest: str) -> dict[str, Any]:
    model = str(body.get("model", ""))
    text = _answer_text(key, model)
    prompt = sum(_tokens(orjson.dumps(m).decode()) for m in body.get("messages") or [])
    completion = _tokens(text)
    return {
        "id": f"chatcmpl-{digest[:24]}",
        "object": "chat.completion",
        "created": CREATED,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text, "refusal": None},
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0},
        },
        "system_fingerprint": "fp_sim",
    }


def _completion(body: dict[str, Any], key: str, digest: str) -> dict[str, Any]:
    model = str(body.get("model", ""))
    text = _answer_text(key, model)
    prompt, completion = _tokens(key), _tokens(text)
    return {
        "id": f"cmpl-{digest[:24]}",
        "object": "text_completion",
        "created": CREATED,
        "model": model,
        "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": "stop"}],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        },
    }


def _embeddings(body: dict[str, Any], key: str, digest: str, dimensions: int) -> dict[str, Any]:
    inputs = body.get("input")
    inputs = inputs if isinstance(inputs, list) else [inputs]
    dims = int(body.get("dimensions") or dimensions)
    data = []
    for index, value in enumerate(inputs):
        seed = _digest(orjson.dumps(value))
        vector = [round((int(seed[(i * 2) % 64 : (i * 2) % 64 + 2], 16) - 128) / 128, 6) for i in range(dims)]
        data.append({"object": "embedding", "index": index, "embedding": vector})
    prompt = sum(_tokens(orjson.dumps(v).decode()) for v in inputs)
    return {
        "object": "list",
        "data": data,
        "model": body.get("model", ""),
        "usage": {"prompt_tokens": prompt, "total_tokens": prompt},
    }


def _responses(body: dict[str, Any], key: str, digest: str) -> dict[str, Any]:
    model = str(body.get("model", ""))
    text = _answer_text(key, model)
    prompt, completion = _tokens(key), _tokens(text)
    return {
        "id": f"resp_{digest[:24]}",
        "object": "response",
        "created_at": CREATED,
        "status": "completed",
        "model": model,
        "output": [
            {
                "type": "message",
                "id": f"msg_{digest[:24]}",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        ],
        "usage": {
            "input_tokens": prompt,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": completion,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": prompt + completion,
        },
    }


def _messages(body: dict[str, Any], key: str, digest: str) -> dict[str, Any]:
    model = str(body.get("model", ""))
    text = _answer_text(key, model)
    prompt = sum(_tokens(orjson.dumps(m).decode()) for m in body.get("messages") or [])
    return {
        "id": f"msg_{digest[:24]}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": prompt,
            "output_tokens": _tokens(text),
            "cache_read_input_tokens": 0,
            "cache_creation_input_tokens": 0,
        },
    }


def build_app(options: SimulatorOptions) -> web.Application:
    state = _State(options=options, rng=random.Random(options.seed))

    def respond(status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> web.Response:
        state.calls_by_status[status] += 1
        return web.Response(
            status=status,
            body=orjson.dumps(payload),
            content_type="application/json",
            headers={"x-request-id": f"req_sim_{state.total}", **(headers or {})},
        )

    def handler(kind: str) -> Any:
        anthropic = kind == "messages"
        error = _anthropic_error if anthropic else _openai_error

        async def handle(request: web.Request) -> web.Response:
            raw = await request.read()
            state.total += 1
            try:
                body = orjson.loads(raw)
                assert isinstance(body, dict)
            except (orjson.JSONDecodeError, AssertionError):
                return respond(400, error(400, "The body must be a JSON object."))
            key = _content_key(body)
            state.calls_by_content[key] += 1
            digest = _digest(raw)
            sim = body.get("x_sim") if isinstance(body.get("x_sim"), dict) else {}
            state.calls_by_key[digest] += 1
            delay = options.latency_ms + float(sim.get("delay_ms", 0))
            if delay > 0:
                await asyncio.sleep(delay / 1000)
            if body.get("model") in (sim.get("fail_models") or ()):
                return respond(503, error(503, f"Model {body.get('model')} is unavailable (simulated)."))
            status = sim.get("status")
            if status and state.calls_by_key[digest] <= int(sim.get("times", 1_000_000)):
                headers = {"retry-after": str(sim["retry_after"])} if "retry_after" in sim else {}
                return respond(int(status), error(int(status), f"Simulated HTTP {status}."), headers)
            roll = state.rng.random()
            if roll < options.rate_limit_rate:
                return respond(429, error(429, "Rate limit reached (simulated)."), {"retry-after": "1"})
            if roll < options.rate_limit_rate + options.error_rate:
                return respond(500, error(500, "Internal error (simulated)."))
            if kind == "chat":
                return respond(200, _chat(body, key, digest))
            if kind == "completions":
                return respond(200, _completion(body, key, digest))
            if kind == "embeddings":
                return respond(200, _embeddings(body, key, digest, options.embedding_dimensions))
            if kind == "responses":
                return respond(200, _responses(body, key, digest))
            return respond(200, _messages(body, key, digest))

        return handle

    async def stats(_request: web.Request) -> web.Response:
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

    async def health(_request: web.Request) -> web.Response:
        return web.Response(text="ok")

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/v1/chat/completions", handler("chat"))
    app.router.add_post("/v1/completions", handler("completions"))
    app.router.add_post("/v1/embeddings", handler("embeddings"))
    app.router.add_post("/v1/responses", handler("responses"))
    app.router.add_post("/v1/messages", handler("messages"))
    app.router.add_get("/_sim/stats", stats)
    app.router.add_get("/healthz", health)
    return app


async def serve(host: str, port: int, options: SimulatorOptions, stop: asyncio.Event | None = None) -> None:
    runner = web.AppRunner(build_app(options), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port, backlog=1024)
    await site.start()
    try:
        await (stop or asyncio.Event()).wait()
    finally:
        await runner.cleanup()
