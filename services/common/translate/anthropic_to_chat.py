"""An Anthropic Messages request as an OpenAI chat completion request.

What an Anthropic-shaped item becomes on an OpenAI-compatible upstream (vLLM, Ollama, OpenAI).
Every field either maps, is a no-op here, or is refused with `Untranslatable` naming it:

- `system` (a string or text blocks) → a leading `system` message; `role: system` turns stay
  `system` messages where they are.
- user text / image (base64 → data URL, URL) / PDF document (base64 → `file` part) blocks →
  content parts; `tool_result` blocks → `role: tool` messages, placed before the rest of
  their turn (Anthropic requires them first anyway); assistant `tool_use` blocks →
  `tool_calls` (input as JSON text); `thinking`/`redacted_thinking` blocks of earlier
  assistant turns are left out, as Anthropic itself leaves them out of the context.
- `max_tokens` → `max_tokens` (or `max_completion_tokens`, per `ChatTarget`); 0 is refused.
- `stop_sequences` → `stop`; `temperature`, `top_p` as they are; `top_k` only where the
  upstream takes vLLM's extensions; `metadata.user_id` → `user`.
- tools `{name, description, input_schema, strict}` → function tools; `tool_choice`
  auto→auto, any→required, tool→named function, none→none; `disable_parallel_tool_use` →
  `parallel_tool_calls: false`.
- `output_config.format` (JSON schema) → `response_format` json_schema (strict);
  `output_config.effort` → `reasoning_effort`.
- A final assistant turn (prefill, which the answer continues) → vLLM's
  `continue_final_message`; refused where the upstream lacks vLLM's extensions.
- Left out, as they do not change an answer: `cache_control` anywhere (OpenAI-compatible
  servers cache prompt prefixes by themselves; usage still reports cached tokens),
  `service_tier`, `stream: false`, `thinking: {type: disabled}`, `speed: standard`,
  `eager_input_streaming` on a tool.
- Refused: `thinking` enabled or adaptive, server tools (web search, code execution, …),
  `tool_result.is_error: true`, image/document sources other than base64 or URL images and
  base64 PDFs, citations, `container`, `mcp_servers`, `inference_geo`, and every other field.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from batchgate.services.common.translate.anthropic_tools import chat_tool_choice, chat_tools
from batchgate.services.common.translate.shared import JsonObject, json_text, refuse

NO_OP_VALUES: dict[str, tuple[Any, ...]] = {
    "stream": (False, None),
    "thinking": ({"type": "disabled"}, None),
    "speed": ("standard", None),
    "container": (None,),
    "inference_geo": (None,),
    "diagnostics": (None,),
}
"""Top-level fields that are no-ops on an OpenAI-compatible upstream with these values only."""
DROPPED = frozenset({"cache_control", "service_tier"})
"""Top-level hints that never change an answer."""
HINTS = {
    "thinking": "extended thinking has no OpenAI-compatible equivalent; remove it or set "
    "'output_config.effort' for reasoning models",
    "stream": "a batch request cannot stream",
}
BLOCK_NO_OP_VALUES: dict[str, tuple[Any, ...]] = {
    "cache_control": (),  # any value: dropped
    "citations": (None, [], {"enabled": False}),
    "caller": (None, {"type": "direct"}),
    "toolset_name": (None,),
    "is_error": (None, False),
    "context": (None,),
    "transformations": (None,),
}
"""Content-block fields that are no-ops with these values (an empty tuple: any value)."""
BLOCK_HINTS = {
    "is_error": "a tool result's error flag has no OpenAI equivalent; say so in its content and "
    "remove 'is_error'",
    "citations": "citations have no OpenAI equivalent",
}
IMAGE_MEDIA_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})


MaxTokensField = Literal["max_tokens", "max_completion_tokens"]


@dataclass(frozen=True, kw_only=True)
class ChatTarget:
    """What the OpenAI-compatible upstream takes beyond OpenAI's own parameters."""

    max_tokens_field: MaxTokensField = "max_tokens"
    """Where the output limit goes: `max_tokens` (vLLM, Ollama, llama.cpp, older OpenAI
    models) or `max_completion_tokens` (OpenAI's reasoning models refuse `max_tokens`)."""
    vllm_extensions: bool = False
    """The upstream takes vLLM's extra chat parameters: `top_k`, and `continue_final_message`
    with `add_generation_prompt: false` (how an Anthropic prefill is continued)."""


def _check_fields(block: Mapping[str, Any], allowed: frozenset[str], param: str) -> None:
    """Every field of `block` is `allowed` or a no-op (see `BLOCK_NO_OP_VALUES`)."""
    for key, value in block.items():
        if key in allowed:
            continue
        no_ops = BLOCK_NO_OP_VALUES.get(key)
        if no_ops is None or (no_ops and value not in no_ops):
            why = BLOCK_HINTS.get(key, "has no equivalent on an OpenAI-compatible upstream")
            raise refuse(f"{param}.{key}", why)


def _text_part(block: Mapping[str, Any], param: str) -> JsonObject:
    _check_fields(block, frozenset({"type", "text"}), param)
    text = block.get("text")
    if not isinstance(text, str):
        raise refuse(f"{param}.text", "must be a string")
    return {"type": "text", "text": text}


def _image_part(block: Mapping[str, Any], param: str) -> JsonObject:
    _check_fields(block, frozenset({"type", "source"}), param)
    source = block.get("source")
    kind = source.get("type") if isinstance(source, dict) else None
    if kind == "base64" and isinstance(source, dict):
        media_type, data = source.get("media_type"), source.get("data")
        if (
            not isinstance(media_type, str)
            or media_type not in IMAGE_MEDIA_TYPES
            or not isinstance(data, str)
        ):
            raise refuse(f"{param}.source", "needs a JPEG, PNG, GIF or WebP 'media_type' and base64 'data'")
        return {"type": "image_url", "image_url": {"url": f"data:{media_type};base64,{data}"}}
    if kind == "url" and isinstance(source, dict) and isinstance(source.get("url"), str):
        return {"type": "image_url", "image_url": {"url": source["url"]}}
    raise refuse(f"{param}.source", "only base64 and URL images have an OpenAI equivalent")


def _document_part(block: Mapping[str, Any], param: str) -> JsonObject:
    _check_fields(block, frozenset({"type", "source", "title"}), param)
    source = block.get("source")
    if not (
        isinstance(source, dict)
        and source.get("type") == "base64"
        and source.get("media_type") == "application/pdf"
        and isinstance(source.get("data"), str)
    ):
        raise refuse(f"{param}.source", "only base64 PDF documents have an OpenAI equivalent (a file part)")
    title = block.get("title")
    file = {
        "filename": title if isinstance(title, str) and title else "document.pdf",
        "file_data": f"data:application/pdf;base64,{source['data']}",
    }
    return {"type": "file", "file": file}


def _tool_message(block: Mapping[str, Any], param: str) -> JsonObject:
    _check_fields(block, frozenset({"type", "tool_use_id", "content"}), param)
    tool_use_id = block.get("tool_use_id")
    if not isinstance(tool_use_id, str) or not tool_use_id:
        raise refuse(f"{param}.tool_use_id", "must be a non-empty string")
    content = block.get("content", "")
    if isinstance(content, list):
        parts = []
        for number, part in enumerate(content):
            if not isinstance(part, dict) or part.get("type") != "text":
                raise refuse(f"{param}.content[{number}]", "OpenAI tool results carry text only")
            parts.append(_text_part(part, f"{param}.content[{number}]"))
        return {"role": "tool", "tool_call_id": tool_use_id, "content": parts}
    if not isinstance(content, str):
        raise refuse(f"{param}.content", "must be a string or a list of text blocks")
    return {"role": "tool", "tool_call_id": tool_use_id, "content": content}


def _tool_call(block: Mapping[str, Any], param: str) -> JsonObject:
    _check_fields(block, frozenset({"type", "id", "name", "input"}), param)
    ident, name, arguments = block.get("id"), block.get("name"), block.get("input")
    if not isinstance(ident, str) or not isinstance(name, str) or not isinstance(arguments, dict):
        raise refuse(param, "a tool_use block needs a string 'id' and 'name' and an object 'input'")
    return {"id": ident, "type": "function", "function": {"name": name, "arguments": json_text(arguments)}}


USER_PARTS: dict[str, Callable[[Mapping[str, Any], str], JsonObject]] = {
    "text": _text_part,
    "image": _image_part,
    "document": _document_part,
}


def _blocks(content: Any, param: str) -> list[tuple[str, Mapping[str, Any], str]]:
    """(type, block, path) of each block of a list content (never empty)."""
    if not isinstance(content, list) or not content:
        raise refuse(param, "must be a string or a non-empty list of content blocks")
    out: list[tuple[str, Mapping[str, Any], str]] = []
    for number, block in enumerate(content):
        path = f"{param}[{number}]"
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise refuse(path, "each content block must be an object with a 'type'")
        out.append((block["type"], block, path))
    return out


def _user_messages(content: Any, param: str) -> list[JsonObject]:
    """One user turn: its tool results as `tool` messages, then a user message of the rest."""
    if isinstance(content, str):
        return [{"role": "user", "content": content}]
    tools: list[JsonObject] = []
    parts: list[JsonObject] = []
    for kind, block, path in _blocks(content, param):
        if kind == "tool_result":
            tools.append(_tool_message(block, path))
        elif kind in USER_PARTS:
            parts.append(USER_PARTS[kind](block, path))
        else:
            raise refuse(path, f"'{kind}' blocks have no equivalent in an OpenAI user message")
    return tools + ([{"role": "user", "content": parts}] if parts else [])


def _assistant_message(content: Any, param: str) -> JsonObject:
    if isinstance(content, str):
        return {"role": "assistant", "content": content}
    parts: list[JsonObject] = []
    calls: list[JsonObject] = []
    for kind, block, path in _blocks(content, param):
        if kind == "text":
            parts.append(_text_part(block, path))
        elif kind == "tool_use":
            calls.append(_tool_call(block, path))
        elif kind not in ("thinking", "redacted_thinking"):
            raise refuse(path, f"'{kind}' blocks have no equivalent in an OpenAI assistant message")
    message: JsonObject = {"role": "assistant", "content": parts or (None if calls else "")}
    if calls:
        message["tool_calls"] = calls
    return message


def _system_content(system: Any, param: str) -> str | list[JsonObject]:
    if isinstance(system, str):
        return system
    parts = []
    for kind, block, path in _blocks(system, param):
        if kind != "text":
            raise refuse(path, "system content must be text")
        parts.append(_text_part(block, path))
    return parts


def _conversation(params: Mapping[str, Any], target: ChatTarget, out: JsonObject) -> list[JsonObject]:
    system = params.get("system")
    messages: list[JsonObject] = []
    if system:
        messages.append({"role": "system", "content": _system_content(system, "system")})
    turns = params.get("messages")
    if not isinstance(turns, list) or not turns:
        raise refuse("messages", "must be a non-empty list")
    for number, turn in enumerate(turns):
        param = f"messages[{number}]"
        role = turn.get("role") if isinstance(turn, dict) else None
        content = turn.get("content") if isinstance(turn, dict) else None
        if role == "user":
            messages += _user_messages(content, f"{param}.content")
        elif role == "assistant":
            messages.append(_assistant_message(content, f"{param}.content"))
        elif role == "system":
            messages.append({"role": "system", "content": _system_content(content, f"{param}.content")})
        else:
            raise refuse(f"{param}.role", "must be user, assistant or system")
    if turns[-1].get("role") == "assistant":
        if not target.vllm_extensions:
            raise refuse(
                f"messages[{len(turns) - 1}]",
                "a final assistant turn (prefill, continued by the answer) cannot be continued "
                "by this OpenAI-compatible upstream; end with a user turn",
            )
        out["continue_final_message"] = True
        out["add_generation_prompt"] = False
    return messages


def _max_tokens(value: Any, out: JsonObject, target: ChatTarget) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise refuse("max_tokens", "must be a whole number of at least 1")
    if value == 0:
        raise refuse("max_tokens", "0 (prompt-cache pre-warming) has no OpenAI-compatible equivalent")
    out[target.max_tokens_field] = value


def _stop_sequences(value: Any, out: JsonObject, target: ChatTarget) -> None:
    if not isinstance(value, list) or not all(isinstance(s, str) for s in value):
        raise refuse("stop_sequences", "must be a list of strings")
    if value:
        out["stop"] = list(value)


def _sampling(name: str) -> Callable[[Any, JsonObject, ChatTarget], None]:
    def copy(value: Any, out: JsonObject, target: ChatTarget) -> None:
        if value is not None:
            out[name] = value

    return copy


def _top_k(value: Any, out: JsonObject, target: ChatTarget) -> None:
    if value is None:
        return
    if not target.vllm_extensions:
        raise refuse("top_k", "this OpenAI-compatible upstream has no top-k sampling; remove it")
    out["top_k"] = value


def _metadata(value: Any, out: JsonObject, target: ChatTarget) -> None:
    if not isinstance(value, dict):
        raise refuse("metadata", "must be an object")
    for key in value:
        if key != "user_id":
            raise refuse(f"metadata.{key}", "only 'user_id' has an OpenAI equivalent ('user')")
    if value.get("user_id") is not None:
        out["user"] = str(value["user_id"])


def _output_config(value: Any, out: JsonObject, target: ChatTarget) -> None:
    if not isinstance(value, dict):
        raise refuse("output_config", "must be an object")
    for key, setting in value.items():
        if key == "format" and setting is not None:
            if not isinstance(setting, dict) or setting.get("type") != "json_schema":
                raise refuse("output_config.format", "only a json_schema format has an OpenAI equivalent")
            schema = {"name": "output", "schema": setting.get("schema"), "strict": True}
            out["response_format"] = {"type": "json_schema", "json_schema": schema}
        elif key == "effort" and setting is not None:
            out["reasoning_effort"] = setting
        elif key not in ("format", "effort"):
            raise refuse(f"output_config.{key}", "has no equivalent on an OpenAI-compatible upstream")


FIELDS: dict[str, Callable[[Any, JsonObject, ChatTarget], None]] = {
    "max_tokens": _max_tokens,
    "stop_sequences": _stop_sequences,
    "temperature": _sampling("temperature"),
    "top_p": _sampling("top_p"),
    "top_k": _top_k,
    "metadata": _metadata,
    "tools": lambda value, out, _target: chat_tools(value, out),
    "tool_choice": lambda value, out, _target: chat_tool_choice(value, out),
    "output_config": _output_config,
}
"""How each top-level field maps (besides `model`, `system` and `messages`)."""


def to_chat_request(params: Mapping[str, Any], *, model: str, target: ChatTarget) -> JsonObject:
    """`params` (an Anthropic Messages request) as an OpenAI chat completion request for
    `model` (the upstream's name of it). Raises `Untranslatable` naming the first field that
    has no equivalent on `target`."""
    if "max_tokens" not in params:
        raise refuse("max_tokens", "is required")
    out: JsonObject = {"model": model}
    out["messages"] = _conversation(params, target, out)
    for key, value in params.items():
        if key in FIELDS:
            FIELDS[key](value, out, target)
        elif key in ("model", "system", "messages") or key in DROPPED:
            continue
        elif key not in NO_OP_VALUES or value not in NO_OP_VALUES[key]:
            why = HINTS.get(key, "has no equivalent on an OpenAI-compatible upstream")
            raise refuse(key, why)
    return out
