"""What the simulated upstream answers (`batchgate.simulator`): OpenAI chat completions,
completions, embeddings and responses, Anthropic messages, and both providers' errors, all
derived from the request so that the same request always gets the same answer.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

CREATED = 1_767_225_600  # fixed so answers are byte-identical across runs


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _text_or_json(content: Any) -> str:
    """A string as is; a list of text parts/blocks as their text; anything else as JSON."""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(p, dict) and p.get("type") == "text" for p in content):
        return "".join(str(p.get("text", "")) for p in content)
    return orjson.dumps(content).decode()


def content_key(body: dict[str, Any]) -> str:
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
    short = sha256_hex(f"{model}:{key}".encode())[:12]
    return f"Simulated answer {short} to: {key[:60]}"


def openai_error(status: int, message: str) -> dict[str, Any]:
    kind = {
        400: "invalid_request_error",
        401: "authentication_error",
        404: "not_found_error",
        429: "rate_limit_error",
    }.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": message, "type": kind, "param": None, "code": f"sim_{status}"}}


def anthropic_error(status: int, message: str) -> dict[str, Any]:
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


def chat(body: dict[str, Any], key: str, digest: str) -> dict[str, Any]:
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


def completion(body: dict[str, Any], key: str, digest: str) -> dict[str, Any]:
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


def embeddings(body: dict[str, Any], key: str, digest: str, dimensions: int) -> dict[str, Any]:
    inputs = body.get("input")
    inputs = inputs if isinstance(inputs, list) else [inputs]
    dims = int(body.get("dimensions") or dimensions)
    data = []
    for index, value in enumerate(inputs):
        seed = sha256_hex(orjson.dumps(value))
        vector = [round((int(seed[(i * 2) % 64 : (i * 2) % 64 + 2], 16) - 128) / 128, 6) for i in range(dims)]
        data.append({"object": "embedding", "index": index, "embedding": vector})
    prompt = sum(_tokens(orjson.dumps(v).decode()) for v in inputs)
    return {
        "object": "list",
        "data": data,
        "model": body.get("model", ""),
        "usage": {"prompt_tokens": prompt, "total_tokens": prompt},
    }


def responses(body: dict[str, Any], key: str, digest: str) -> dict[str, Any]:
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


def messages(body: dict[str, Any], key: str, digest: str) -> dict[str, Any]:
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


def ask_for_tools(answer: dict[str, Any], sim: dict[str, Any], body: dict[str, Any], digest: str) -> None:
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


def steer(answer: dict[str, Any], sim: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
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
