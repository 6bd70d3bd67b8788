"""An OpenAI chat completion request as an Anthropic Messages request.

What an OpenAI-shaped item becomes on an Anthropic upstream:
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
- No equivalent, refused naming the parameter: `n` > 1, `logprobs`/`top_logprobs`,
  `audio`/`modalities` other than text, `response_format` other than `text`, legacy
  `functions`/`function_call`. Dropped (they only tune sampling or bookkeeping):
  `frequency_penalty`, `presence_penalty`, `logit_bias`, `seed`, `store`, `metadata`,
  `service_tier`, `stream`/`stream_options`, `prediction`, `reasoning_effort`, `verbosity`,
  `prompt_cache_key`, `safety_identifier`. Any other key passes through unchanged, so
  Anthropic-only parameters (`top_k`, `thinking`, …) can ride in an OpenAI-shaped body.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from batchgate.services.common.translate.shared import JsonObject, Untranslatable, json_object

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
TOOL_CHOICES = {"auto": "auto", "required": "any", "none": "none"}


def _refuse_unsupported(body: Mapping[str, Any]) -> None:
    if (body.get("n") or 1) != 1:
        raise Untranslatable("Anthropic models return one choice: 'n' must be 1.", "n")
    if body.get("logprobs") or body.get("top_logprobs"):
        raise Untranslatable("Anthropic models do not return log probabilities.", "logprobs")
    modalities = body.get("modalities") or ["text"]
    if (
        body.get("audio") is not None
        or not isinstance(modalities, list)
        or any(m != "text" for m in modalities)
    ):
        raise Untranslatable("Anthropic models answer with text only.", "modalities")
    response_format = body.get("response_format")
    if response_format is not None and (
        not isinstance(response_format, dict) or response_format.get("type") != "text"
    ):
        raise Untranslatable(
            "'response_format' other than text has no Anthropic equivalent; ask for JSON in the prompt.",
            "response_format",
        )
    if "functions" in body or "function_call" in body:
        raise Untranslatable("Use 'tools' and 'tool_choice' instead of 'functions'.", "functions")


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
                raise Untranslatable("Only text parts are allowed here.", param)
            parts.append(str(part.get("text") or part.get("refusal") or ""))
        return "".join(parts)
    raise Untranslatable("Message content must be a string or a list of parts.", param)


def _with_cache_control(block: JsonObject, part: Mapping[str, Any]) -> JsonObject:
    if "cache_control" in part:
        block["cache_control"] = part["cache_control"]
    return block


def _data_url(url: str, param: str) -> tuple[str, str]:
    """(media type, base64 data) of a `data:<type>;base64,<data>` URL."""
    head, sep, data = url.partition(",")
    if not sep or not head.startswith("data:") or not head.endswith(";base64"):
        raise Untranslatable("Inline data must be a base64 data URL.", param)
    return head[len("data:") : -len(";base64")], data


def _image(part: Mapping[str, Any], param: str) -> JsonObject:
    image = part.get("image_url")
    url = image.get("url") if isinstance(image, dict) else image
    if not isinstance(url, str):
        raise Untranslatable("'image_url.url' must be a string.", param)
    if url.startswith("data:"):
        media_type, data = _data_url(url, param)
        source: JsonObject = {"type": "base64", "media_type": media_type, "data": data}
    elif url.startswith(("http://", "https://")):
        source = {"type": "url", "url": url}
    else:
        raise Untranslatable("Images must be data URLs or http(s) URLs.", param)
    return _with_cache_control({"type": "image", "source": source}, part)


def _document(part: Mapping[str, Any], param: str) -> JsonObject:
    file = part.get("file")
    data_url = file.get("file_data") if isinstance(file, dict) else None
    if not isinstance(data_url, str):
        raise Untranslatable("File parts need inline 'file_data' (a PDF data URL).", param)
    media_type, data = _data_url(data_url, param)
    if media_type != "application/pdf":
        raise Untranslatable("Anthropic models read PDF files only.", param)
    source = {"type": "base64", "media_type": media_type, "data": data}
    return _with_cache_control({"type": "document", "source": source}, part)


def _user_blocks(content: Any, param: str) -> list[JsonObject]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise Untranslatable("Message content must be a string or a list of parts.", param)
    blocks: list[JsonObject] = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            blocks.append(_with_cache_control({"type": "text", "text": str(part.get("text", ""))}, part))
        elif kind == "image_url":
            blocks.append(_image(part, param))
        elif kind == "file":
            blocks.append(_document(part, param))
        else:
            raise Untranslatable(f"Content parts of type {kind!r} have no Anthropic equivalent.", param)
    return blocks


def _assistant_blocks(message: Mapping[str, Any], param: str) -> list[JsonObject]:
    blocks: list[JsonObject] = []
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
    calls = message.get("tool_calls") or []
    if not isinstance(calls, list):
        raise Untranslatable("'tool_calls' must be a list.", param)
    for call in calls:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not function.get("name"):
            raise Untranslatable("Each tool call needs a function name.", param)
        arguments = json_object(function.get("arguments"), param=param, what="Tool call arguments")
        blocks.append(
            {"type": "tool_use", "id": call.get("id") or "", "name": function["name"], "input": arguments}
        )
    return blocks


def _tool_result(message: Mapping[str, Any], param: str) -> JsonObject:
    content = message.get("content")
    block: JsonObject = {"type": "tool_result", "tool_use_id": message.get("tool_call_id") or ""}
    if isinstance(content, list):
        block["content"] = [{"type": "text", "text": _text([p], param)} for p in content]
    else:
        block["content"] = _text(content, param)
    return block


def _system_blocks(content: Any, param: str) -> list[JsonObject]:
    parts = content if isinstance(content, list) else [{"type": "text", "text": _text(content, param)}]
    return [
        _with_cache_control({"type": "text", "text": _text([p], param)}, p)
        for p in parts
        if isinstance(p, dict)
    ]


def _turn(message: Mapping[str, Any], param: str) -> tuple[str, list[JsonObject]]:
    """(Anthropic role, blocks) of one non-system message."""
    role = message.get("role")
    if role == "user":
        return "user", _user_blocks(message.get("content"), param)
    if role == "assistant":
        return "assistant", _assistant_blocks(message, param)
    if role == "tool":
        return "user", [_tool_result(message, param)]
    raise Untranslatable(f"Messages of role {role!r} have no Anthropic equivalent.", param)


def _messages(messages: Any) -> tuple[list[JsonObject], list[JsonObject]]:
    """(system text blocks, alternating user/assistant turns)."""
    if not isinstance(messages, list) or not messages:
        raise Untranslatable("'messages' must be a non-empty list.", "messages")
    system: list[JsonObject] = []
    turns: list[JsonObject] = []
    for number, message in enumerate(messages):
        param = f"messages[{number}]"
        if not isinstance(message, dict):
            raise Untranslatable("Each message must be an object.", param)
        if message.get("role") in ("system", "developer"):
            system += _system_blocks(message.get("content"), param)
            continue
        role, blocks = _turn(message, param)
        if not blocks:
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"] += blocks
        else:
            turns.append({"role": role, "content": blocks})
    return system, turns


def _tools(tools: Any) -> list[JsonObject]:
    if not isinstance(tools, list):
        raise Untranslatable("'tools' must be a list.", "tools")
    out = []
    for tool in tools:
        function = tool.get("function") if isinstance(tool, dict) else None
        if (
            not isinstance(tool, dict)
            or tool.get("type", "function") != "function"
            or not isinstance(function, dict)
            or not function
        ):
            raise Untranslatable("Only function tools have an Anthropic equivalent.", "tools")
        entry: JsonObject = {
            "name": function.get("name"),
            "input_schema": function.get("parameters") or {"type": "object", "properties": {}},
        }
        if function.get("description"):
            entry["description"] = function["description"]
        out.append(_with_cache_control(entry, tool))
    return out


def _tool_choice(choice: Any, parallel: Any) -> JsonObject | None:
    if choice is None:
        mapped: JsonObject | None = {"type": "auto"} if parallel is False else None
    elif isinstance(choice, str) and choice in TOOL_CHOICES:
        mapped = {"type": TOOL_CHOICES[choice]}
    elif isinstance(choice, dict) and isinstance(choice.get("function"), dict):
        mapped = {"type": "tool", "name": choice["function"].get("name")}
    else:
        raise Untranslatable("'tool_choice' must be auto, required, none or a function.", "tool_choice")
    if mapped is not None and parallel is False and mapped["type"] != "none":
        mapped["disable_parallel_tool_use"] = True
    return mapped


def _temperature(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise Untranslatable("'temperature' must be a number.", "temperature")
    return min(float(value), 1.0)


def _stop_sequences(stop: Any) -> list[str]:
    if isinstance(stop, str):
        return [stop]
    if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
        raise Untranslatable("'stop' must be a string or a list of strings.", "stop")
    return list(stop)


def to_anthropic_request(body: Mapping[str, Any], *, model: str, default_max_tokens: int) -> JsonObject:
    """`body` (an OpenAI chat completion request) as an Anthropic Messages request for `model`
    (the upstream's name of it); `default_max_tokens` when the body sets no limit."""
    _refuse_unsupported(body)
    system, turns = _messages(body.get("messages"))
    out: JsonObject = {key: value for key, value in body.items() if key not in HANDLED and key not in DROPPED}
    out["model"] = model
    out["messages"] = turns
    if system:
        plain = all(set(b) == {"type", "text"} for b in system)
        out["system"] = "\n\n".join(b["text"] for b in system) if plain else system
    out["max_tokens"] = body.get("max_completion_tokens") or body.get("max_tokens") or default_max_tokens
    if body.get("temperature") is not None:
        out["temperature"] = _temperature(body["temperature"])
    if body.get("top_p") is not None:
        out["top_p"] = body["top_p"]
    stop = body.get("stop")
    if stop:
        out["stop_sequences"] = _stop_sequences(stop)
    if body.get("user"):
        out["metadata"] = {"user_id": str(body["user"])}
    if body.get("tools"):
        out["tools"] = _tools(body["tools"])
    choice = _tool_choice(body.get("tool_choice"), body.get("parallel_tool_calls"))
    if choice is not None and (body.get("tools") or choice["type"] == "none"):
        out["tool_choice"] = choice
    return out
