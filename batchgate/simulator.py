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
import hashlib
import random
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

CREATED = 1_767_225_600  # fixed so answers are byte-identical across runs
CALL_LOG_MAX = 200_000


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
    calls: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=CALL_LOG_MAX))
    total: int = 0


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _text_or_json(content: Any) -> str:
    """A string as is; a list of text parts/blocks as their text; anything else as JSON."""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(p, dict) and p.get("type") == "text" for p in content):
        return "".join(str(p.get("text", "")) for p in content)
    return orjson.dumps(content).decode()


def _content_key(body: dict[str, Any]) -> str:
    """What identifies a request for stats: its last message / input / prompt (the same for an
    OpenAI chat request and its Anthropic translation)."""
    messages = body.get("messages")
    if isinstance(messages, list) and messages:
        last = messages[-1]
        return _text_or_json(last.get("content") if isinstance(last, dict) else last)
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


def _seen(body: dict[str, Any]) -> str:
    """What `x_sim.echo` answers: the request as received, without the steering object."""
    return orjson.dumps({k: v for k, v in body.items() if k != "x_sim"}).decode()


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


def _tool_use(body: dict[str, Any], digest: str) -> dict[str, Any] | None:
    """A call of the first offered tool, unless the last turn answers one or tools are off."""
    tools = body.get("tools")
    choice = body.get("tool_choice") or {}
    if not isinstance(tools, list) or not tools or choice.get("type") == "none":
        return None
    last = (body.get("messages") or [{}])[-1]
    content = last.get("content") if isinstance(last, dict) else None
    if isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in content
    ):
        return None
    tool = next((t for t in tools if t.get("name") == choice.get("name")), tools[0])
    properties = (tool.get("input_schema") or {}).get("properties") or {}
    sample = {"integer": 1, "number": 1.5, "boolean": True}
    arguments = {name: sample.get(spec.get("type"), "simulated") for name, spec in properties.items()}
    return {"type": "tool_use", "id": f"toolu_{digest[:24]}", "name": tool.get("name"), "input": arguments}


def _messages(body: dict[str, Any], key: str, digest: str) -> dict[str, Any]:
    model = str(body.get("model", ""))
    text = _answer_text(key, model)
    prompt = sum(_tokens(orjson.dumps(m).decode()) for m in body.get("messages") or [])
    content: list[dict[str, Any]] = [{"type": "text", "text": text}]
    call = _tool_use(body, digest)
    if call is not None:
        content.append(call)
    return {
        "id": f"msg_{digest[:24]}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": "tool_use" if call is not None else "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": prompt,
            "output_tokens": _tokens(text),
            "cache_read_input_tokens": 0,
            "cache_creation_input_tokens": 0,
        },
    }


def _tool_calls(answer: dict[str, Any], sim: dict[str, Any], body: dict[str, Any], digest: str) -> None:
    """`x_sim.tool_rounds`: a chat answer that calls the first offered tool `x_sim.tool_calls`
    times (default 1) while fewer rounds ran; the arguments name the round."""
    tools = body.get("tools")
    wanted = sim.get("tool_rounds")
    if not isinstance(wanted, int) or not isinstance(tools, list) or not tools or "choices" not in answer:
        return
    messages = body.get("messages") or []
    done = sum(
        1 for m in messages if isinstance(m, dict) and m.get("role") == "assistant" and m.get("tool_calls")
    )
    if done >= wanted:
        return
    function = tools[0].get("function") if isinstance(tools[0], dict) else None
    name = function.get("name", "tool") if isinstance(function, dict) else "tool"
    calls = [
        {
            "id": f"call_{digest[:16]}_{n}",
            "type": "function",
            "function": {"name": name, "arguments": orjson.dumps({"round": done + 1, "call": n}).decode()},
        }
        for n in range(int(sim.get("tool_calls", 1)))
    ]
    choice = answer["choices"][0]
    choice["message"] = {"role": "assistant", "content": None, "tool_calls": calls, "refusal": None}
    choice["finish_reason"] = "tool_calls"


def _steer(answer: dict[str, Any], sim: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    """Apply `x_sim`'s echo/usage/stop_reason to a successful answer."""
    if sim.get("echo"):
        seen = _seen(body)
        if "choices" in answer:
            answer["choices"][0]["message"]["content"] = seen
        elif answer.get("type") == "message":
            answer["content"][0]["text"] = seen
    if isinstance(sim.get("usage"), dict) and isinstance(answer.get("usage"), dict):
        answer["usage"].update(sim["usage"])
    if sim.get("stop_reason") and answer.get("type") == "message":
        answer["stop_reason"] = sim["stop_reason"]
    return answer


def _api_key(request: web.Request) -> str:
    bearer = request.headers.get("authorization", "")
    return request.headers.get("x-api-key") or bearer.removeprefix("Bearer ").strip()


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
            api_key = _api_key(request)
            try:
                body = orjson.loads(raw)
                assert isinstance(body, dict)
            except (orjson.JSONDecodeError, AssertionError):
                return respond(400, error(400, "The body must be a JSON object."))
            key = _content_key(body)
            state.calls_by_content[key] += 1
            call = {"content": key, "model": body.get("model"), "api_key": api_key, "at": time.time()}
            state.calls.append(call)  # its status is added when it answers

            def reply(
                status: int, payload: dict[str, Any], headers: dict[str, str] | None = None
            ) -> web.Response:
                call["status"] = status
                return respond(status, payload, headers)

            digest = _digest(raw)
            sim = body.get("x_sim") if isinstance(body.get("x_sim"), dict) else {}
            state.calls_by_key[digest] += 1
            delay = options.latency_ms + float(sim.get("delay_ms", 0))
            if delay > 0:
                await asyncio.sleep(delay / 1000)
            if anthropic and not request.headers.get("x-api-key"):
                return reply(401, error(401, "x-api-key header is required."))
            if anthropic and not request.headers.get("anthropic-version"):
                return reply(400, error(400, "anthropic-version header is required."))
            if body.get("model") in (sim.get("fail_models") or ()):
                return reply(503, error(503, f"Model {body.get('model')} is unavailable (simulated)."))
            status = sim.get("status")
            keyed = "keys" not in sim or api_key in sim["keys"]
            if status and keyed and state.calls_by_key[digest] <= int(sim.get("times", 1_000_000)):
                headers = {"retry-after": str(sim["retry_after"])} if "retry_after" in sim else {}
                headers.update({str(k): str(v) for k, v in (sim.get("headers") or {}).items()})
                return reply(int(status), error(int(status), f"Simulated HTTP {status}."), headers)
            roll = state.rng.random()
            if roll < options.rate_limit_rate:
                return reply(429, error(429, "Rate limit reached (simulated)."), {"retry-after": "1"})
            if roll < options.rate_limit_rate + options.error_rate:
                return reply(500, error(500, "Internal error (simulated)."))
            if kind == "chat":
                answer = _chat(body, key, digest)
                _tool_calls(answer, sim, body, digest)
            elif kind == "completions":
                answer = _completion(body, key, digest)
            elif kind == "embeddings":
                answer = _embeddings(body, key, digest, options.embedding_dimensions)
            elif kind == "responses":
                answer = _responses(body, key, digest)
            else:
                answer = _messages(body, key, digest)
            return reply(200, _steer(answer, sim, body))

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

    async def calls(request: web.Request) -> web.Response:
        content = request.query.get("content")
        listed = [c for c in state.calls if content is None or c["content"] == content]
        return web.Response(body=orjson.dumps(listed), content_type="application/json")

    async def health(_request: web.Request) -> web.Response:
        return web.Response(text="ok")

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/v1/chat/completions", handler("chat"))
    app.router.add_post("/v1/completions", handler("completions"))
    app.router.add_post("/v1/embeddings", handler("embeddings"))
    app.router.add_post("/v1/responses", handler("responses"))
    app.router.add_post("/v1/messages", handler("messages"))
    app.router.add_get("/_sim/stats", stats)
    app.router.add_get("/_sim/calls", calls)
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
