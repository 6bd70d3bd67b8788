"""OpenAI chat completions on Anthropic's Messages API, translated both ways.

Request (OpenAI → Anthropic):
- `system`/`developer` messages (wherever they are) → top-level `system`; consecutive
  same-role turns are merged (Anthropic wants user/assistant turns alternating).
- `max_completion_tokens`, else `max_tokens`, else the provider's `default_max_tokens` →
  `max_tokens`; `stop` → `stop_sequences`; `user` → `metadata.user_id`; `temperature` is
  clamped to Anthropic's 0..1; `top_p` as is.
- tools `{type: function, function: {name, description, parameters}}` → `{name, description,
  input_schema}`; `tool_choice` auto→auto, required→any, none→none, a named function→tool;
  `parallel_tool_calls: false` → `disable_parallel_tool_use`.
- assistant `tool_calls` → `tool_use` blocks; `role: tool` → a user turn of `tool_result`
  blocks; images (`image_url`, data URL or http(s)) → image blocks; PDF `file` parts
  (data URL) → document blocks; `cache_control` on a content part is kept.
- No equivalent, refused with a 400 naming the parameter: `n` > 1, `logprobs`/`top_logprobs`,
  `audio`/`modalities` other than text, `response_format` other than `text`, legacy
  `functions`/`function_call`. Dropped silently (they only tune sampling or bookkeeping):
  `frequency_penalty`, `presence_penalty`, `logit_bias`, `seed`, `store`, `metadata`,
  `service_tier`, `stream`/`stream_options`, `prediction`, `reasoning_effort`, `verbosity`,
  `prompt_cache_key`, `safety_identifier`. Any other key passes through unchanged, so
  Anthropic-only parameters (`top_k`, `thinking`, …) can ride in an OpenAI-shaped body.

Answer (Anthropic → OpenAI): text blocks → `message.content`; `tool_use` → `tool_calls`
(arguments = the input as JSON); stop reason end_turn/stop_sequence/pause_turn → stop,
max_tokens/model_context_window_exceeded → length, tool_use → tool_calls, refusal →
content_filter; usage prompt_tokens = input + cache creation + cache read, completion_tokens
= output, cached_tokens = cache read. Errors `{"type":"error","error":{"type","message"}}`
become OpenAI's envelope with the same HTTP status (the Anthropic type kept as `code`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import orjson

from batchgate.services.common.catalogue import ProviderConfig
from batchgate.services.common.errors import ApiError
from batchgate.services.executor.upstream import (
    UnsupportedRequest,
    UpstreamAnswer,
    UpstreamRequest,
    parse_answer,
)

DROPPED = frozenset(
    {
        "frequency_penalty",
        "presence_penalty",
        "logit_bias",
        "seed",
        "store",
        "metadata",
        "service_tier",
        "stream",
        "stream_options",
        "prediction",
        "reasoning_effort",
        "verbosity",
        "prompt_cache_key",
        "safety_identifier",
    }
)
HANDLED = frozenset(
    {
        "model",
        "messages",
        "max_tokens",
        "max_completion_tokens",
        "temperature",
        "top_p",
        "stop",
        "user",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "n",
        "logprobs",
        "top_logprobs",
        "modalities",
        "audio",
        "response_format",
        "functions",
        "function_call",
    }
)
FINISH_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}

Block = dict[str, Any]


def _refuse_unsupported(body: Mapping[str, Any]) -> None:
    if (body.get("n") or 1) != 1:
        raise UnsupportedRequest("Anthropic models return one choice: 'n' must be 1.", "n")
    if body.get("logprobs") or body.get("top_logprobs"):
        raise UnsupportedRequest("Anthropic models do not return log probabilities.", "logprobs")
    if body.get("audio") is not None or set(body.get("modalities") or ["text"]) != {"text"}:
        raise UnsupportedRequest("Anthropic models answer with text only.", "modalities")
    response_format = body.get("response_format")
    if response_format is not None and (
        not isinstance(response_format, dict) or response_format.get("type") != "text"
    ):
        raise UnsupportedRequest(
            "'response_format' other than text has no Anthropic equivalent; ask for JSON in the prompt.",
            "response_format",
        )
    if "functions" in body or "function_call" in body:
        raise UnsupportedRequest("Use 'tools' and 'tool_choice' instead of 'functions'.", "functions")


def _text(content: Any, param: str) -> str:
    """The text of a string content or a list of text parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") not in ("text", "refusal"):
                raise UnsupportedRequest("Only text parts are allowed here.", param)
            parts.append(str(part.get("text") or part.get("refusal") or ""))
        return "".join(parts)
    raise UnsupportedRequest("Message content must be a string or a list of parts.", param)


def _with_cache_control(block: Block, part: Mapping[str, Any]) -> Block:
    if "cache_control" in part:
        block["cache_control"] = part["cache_control"]
    return block


def _data_url(url: str, param: str) -> tuple[str, str]:
    """(media type, base64 data) of a `data:<type>;base64,<data>` URL."""
    head, sep, data = url.partition(",")
    if not sep or not head.startswith("data:") or not head.endswith(";base64"):
        raise UnsupportedRequest("Inline data must be a base64 data URL.", param)
    return head[len("data:") : -len(";base64")], data


def _image(part: Mapping[str, Any], param: str) -> Block:
    image = part.get("image_url")
    url = image.get("url") if isinstance(image, dict) else image
    if not isinstance(url, str):
        raise UnsupportedRequest("'image_url.url' must be a string.", param)
    if url.startswith("data:"):
        media_type, data = _data_url(url, param)
        source: Block = {"type": "base64", "media_type": media_type, "data": data}
    elif url.startswith(("http://", "https://")):
        source = {"type": "url", "url": url}
    else:
        raise UnsupportedRequest("Images must be data URLs or http(s) URLs.", param)
    return _with_cache_control({"type": "image", "source": source}, part)


def _document(part: Mapping[str, Any], param: str) -> Block:
    file = part.get("file")
    data_url = file.get("file_data") if isinstance(file, dict) else None
    if not isinstance(data_url, str):
        raise UnsupportedRequest("File parts need inline 'file_data' (a PDF data URL).", param)
    media_type, data = _data_url(data_url, param)
    if media_type != "application/pdf":
        raise UnsupportedRequest("Anthropic models read PDF files only.", param)
    source = {"type": "base64", "media_type": media_type, "data": data}
    return _with_cache_control({"type": "document", "source": source}, part)


def _user_blocks(content: Any, param: str) -> list[Block]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise UnsupportedRequest("Message content must be a string or a list of parts.", param)
    blocks: list[Block] = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            blocks.append(_with_cache_control({"type": "text", "text": str(part.get("text", ""))}, part))
        elif kind == "image_url":
            blocks.append(_image(part, param))
        elif kind == "file":
            blocks.append(_document(part, param))
        else:
            raise UnsupportedRequest(f"Content parts of type {kind!r} have no Anthropic equivalent.", param)
    return blocks


def _arguments(raw: Any, param: str) -> Any:
    if isinstance(raw, dict):
        return raw
    try:
        parsed = orjson.loads(raw or "{}")
    except (orjson.JSONDecodeError, TypeError):
        raise UnsupportedRequest("Tool call arguments must be a JSON object.", param) from None
    if not isinstance(parsed, dict):
        raise UnsupportedRequest("Tool call arguments must be a JSON object.", param)
    return parsed


def _assistant_blocks(message: Mapping[str, Any], param: str) -> list[Block]:
    blocks: list[Block] = []
    content = message.get("content")
    if isinstance(content, list):
        blocks += [
            _with_cache_control({"type": "text", "text": str(p.get("text") or p.get("refusal") or "")}, p)
            for p in content
            if isinstance(p, dict) and p.get("type") in ("text", "refusal")
        ]
    elif content:
        blocks.append({"type": "text", "text": _text(content, param)})
    blocks = [b for b in blocks if b["text"]]  # Anthropic refuses empty text blocks
    for call in message.get("tool_calls") or ():
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not function.get("name"):
            raise UnsupportedRequest("Each tool call needs a function name.", param)
        blocks.append(
            {
                "type": "tool_use",
                "id": call.get("id") or "",
                "name": function["name"],
                "input": _arguments(function.get("arguments"), param),
            }
        )
    return blocks


def _tool_result(message: Mapping[str, Any], param: str) -> Block:
    content = message.get("content")
    block: Block = {"type": "tool_result", "tool_use_id": message.get("tool_call_id") or ""}
    if isinstance(content, list):
        block["content"] = [{"type": "text", "text": _text([p], param)} for p in content]
    else:
        block["content"] = _text(content, param)
    return block


def _messages(messages: Any) -> tuple[list[Block], list[Block]]:
    """(system text blocks, alternating user/assistant turns)."""
    if not isinstance(messages, list) or not messages:
        raise UnsupportedRequest("'messages' must be a non-empty list.", "messages")
    system: list[Block] = []
    turns: list[Block] = []
    for number, message in enumerate(messages):
        param = f"messages[{number}]"
        if not isinstance(message, dict):
            raise UnsupportedRequest("Each message must be an object.", param)
        role = message.get("role")
        content = message.get("content")
        if role in ("system", "developer"):
            if isinstance(content, list):
                parts = content
            else:
                parts = [{"type": "text", "text": _text(content, param)}]
            system += [
                _with_cache_control({"type": "text", "text": _text([p], param)}, p)
                for p in parts
                if isinstance(p, dict)
            ]
            continue
        if role == "user":
            turn_role, blocks = "user", _user_blocks(content, param)
        elif role == "assistant":
            turn_role, blocks = "assistant", _assistant_blocks(message, param)
        elif role == "tool":
            turn_role, blocks = "user", [_tool_result(message, param)]
        else:
            raise UnsupportedRequest(f"Messages of role {role!r} have no Anthropic equivalent.", param)
        if not blocks:
            continue
        if turns and turns[-1]["role"] == turn_role:
            turns[-1]["content"] += blocks
        else:
            turns.append({"role": turn_role, "content": blocks})
    return system, turns


def _tools(tools: Any) -> list[Block]:
    if not isinstance(tools, list):
        raise UnsupportedRequest("'tools' must be a list.", "tools")
    out = []
    for tool in tools:
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(tool, dict) or tool.get("type", "function") != "function" or not function:
            raise UnsupportedRequest("Only function tools have an Anthropic equivalent.", "tools")
        entry: Block = {
            "name": function.get("name"),
            "input_schema": function.get("parameters") or {"type": "object", "properties": {}},
        }
        if function.get("description"):
            entry["description"] = function["description"]
        out.append(_with_cache_control(entry, tool))
    return out


def _tool_choice(choice: Any, parallel: Any) -> Block | None:
    if choice is None:
        mapped: Block | None = {"type": "auto"} if parallel is False else None
    elif choice in ("auto", "required", "none"):
        mapped = {"type": {"auto": "auto", "required": "any", "none": "none"}[choice]}
    elif isinstance(choice, dict) and isinstance(choice.get("function"), dict):
        mapped = {"type": "tool", "name": choice["function"].get("name")}
    else:
        raise UnsupportedRequest("'tool_choice' must be auto, required, none or a function.", "tool_choice")
    if mapped is not None and parallel is False and mapped["type"] != "none":
        mapped["disable_parallel_tool_use"] = True
    return mapped


def to_messages_request(body: Mapping[str, Any], upstream_model: str, default_max_tokens: int) -> Block:
    """An OpenAI chat completion request as an Anthropic Messages request."""
    _refuse_unsupported(body)
    system, turns = _messages(body.get("messages"))
    out: Block = {key: value for key, value in body.items() if key not in HANDLED and key not in DROPPED}
    out["model"] = upstream_model
    out["messages"] = turns
    if system:
        plain = all(set(b) == {"type", "text"} for b in system)
        out["system"] = "\n\n".join(b["text"] for b in system) if plain else system
    out["max_tokens"] = body.get("max_completion_tokens") or body.get("max_tokens") or default_max_tokens
    if body.get("temperature") is not None:
        out["temperature"] = min(float(body["temperature"]), 1.0)
    if body.get("top_p") is not None:
        out["top_p"] = body["top_p"]
    stop = body.get("stop")
    if stop:
        out["stop_sequences"] = [stop] if isinstance(stop, str) else list(stop)
    if body.get("user"):
        out["metadata"] = {"user_id": str(body["user"])}
    if body.get("tools"):
        out["tools"] = _tools(body["tools"])
    choice = _tool_choice(body.get("tool_choice"), body.get("parallel_tool_calls"))
    if choice is not None and (body.get("tools") or choice["type"] == "none"):
        out["tool_choice"] = choice
    return out


def _usage(usage: Mapping[str, Any]) -> Block:
    def count(key: str) -> int:
        value = usage.get(key)
        return value if isinstance(value, int) else 0

    cached = count("cache_read_input_tokens")
    prompt = count("input_tokens") + count("cache_creation_input_tokens") + cached
    completion = count("output_tokens")
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached},
        "completion_tokens_details": {"reasoning_tokens": 0},
    }


def to_chat_completion(message: Mapping[str, Any]) -> Block:
    """An Anthropic Message as an OpenAI chat.completion."""
    blocks = [b for b in message.get("content") or () if isinstance(b, dict)]
    text = "".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")
    tool_calls = [
        {
            "id": b.get("id"),
            "type": "function",
            "function": {"name": b.get("name"), "arguments": orjson.dumps(b.get("input", {})).decode()},
        }
        for b in blocks
        if b.get("type") == "tool_use"
    ]
    reply: Block = {"role": "assistant", "content": text if text or not tool_calls else None, "refusal": None}
    if tool_calls:
        reply["tool_calls"] = tool_calls
    usage = message.get("usage")
    return {
        "id": message.get("id"),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": message.get("model"),
        "choices": [
            {
                "index": 0,
                "message": reply,
                "logprobs": None,
                "finish_reason": FINISH_REASONS.get(str(message.get("stop_reason")), "stop"),
            }
        ],
        "usage": _usage(usage if isinstance(usage, dict) else {}),
    }


def to_openai_error(status_code: int, parsed: Any) -> Block:
    """An Anthropic error answer in OpenAI's envelope."""
    error = parsed.get("error") if isinstance(parsed, dict) else None
    if isinstance(error, dict) and "param" in error:  # already OpenAI's (an unreadable answer)
        return dict(parsed)
    if isinstance(error, dict) and "message" in error:
        return ApiError(status_code, str(error["message"]), str(error.get("type") or "upstream_error")).body()
    text = orjson.dumps(parsed).decode()[:1000]
    return ApiError(status_code, f"Upstream answered HTTP {status_code}: {text}", "upstream_error").body()


class AnthropicMessages:
    """A provider of kind `anthropic`: chat completions translated to `/v1/messages`."""

    def __init__(self, provider: ProviderConfig) -> None:
        self.provider = provider
        self._url = provider.base_url.rstrip("/") + "/messages"
        self._headers = {"content-type": "application/json", "anthropic-version": provider.anthropic_version}

    def build(self, endpoint: str, body: bytes, upstream_model: str, requested_model: str) -> UpstreamRequest:
        if endpoint != "/v1/chat/completions":
            raise UnsupportedRequest(f"Anthropic models do not serve {endpoint}.", "url")
        translated = to_messages_request(orjson.loads(body), upstream_model, self.provider.default_max_tokens)
        return UpstreamRequest(url=self._url, headers=self._headers, content=orjson.dumps(translated))

    def auth(self, api_key: str) -> dict[str, str]:
        return {"x-api-key": api_key} if api_key else {}

    def request_id(self, headers: Mapping[str, str]) -> str | None:
        return headers.get("request-id") or headers.get("x-request-id")

    def answer(self, endpoint: str, status_code: int, raw: bytes, request_id: str) -> UpstreamAnswer:
        answer = parse_answer(raw, status_code)
        if 200 <= answer.status_code < 300:
            translated = to_chat_completion(answer.parsed)
        else:
            translated = to_openai_error(answer.status_code, answer.parsed)
        return UpstreamAnswer(answer.status_code, orjson.dumps(translated), translated, request_id)
