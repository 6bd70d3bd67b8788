"""Successful answers, both ways: an Anthropic Message ↔ an OpenAI chat.completion.

Anthropic → OpenAI (an OpenAI-shaped item answered by an Anthropic upstream): text blocks →
`message.content`; `tool_use` → `tool_calls` (arguments = the input as JSON text); thinking and
server-tool blocks are left out; stop reason end_turn/stop_sequence/pause_turn → stop,
max_tokens/model_context_window_exceeded → length, tool_use → tool_calls, refusal →
content_filter; usage prompt_tokens = input + cache creation + cache read, completion_tokens =
output, cached_tokens = cache read, cache_write_tokens = cache creation.

OpenAI → Anthropic (an Anthropic-shaped item answered by an OpenAI-compatible upstream): the
first choice's content → a text block, its refusal → a text block with stop reason `refusal`,
`tool_calls` → `tool_use` blocks (arguments parsed; arguments that are not a JSON object are
`Untranslatable`, the raw text in the message); reasoning text some servers add
(`reasoning_content`) is left out, as Anthropic gives no thinking blocks unless asked;
finish_reason stop → end_turn, or stop_sequence with the matched string where the server
reports it (vLLM's `stop_reason`), length → max_tokens, tool_calls (or any tool calls) →
tool_use, content_filter → refusal; usage input_tokens = prompt − cached − cache written,
cache_read_input_tokens = cached_tokens, cache_creation_input_tokens = cache_write_tokens,
output_tokens = completion_tokens.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from batchgate.services.common.errors import clip
from batchgate.services.common.translate.shared import JsonObject, Untranslatable, json_object, json_text

FINISH_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}
STOP_REASONS = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "content_filter": "refusal",
}
RAW_ARGUMENTS_SHOWN = 200


def _count(usage: Mapping[str, Any], key: str) -> int:
    value = usage.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _chat_usage(usage: Mapping[str, Any]) -> JsonObject:
    cached = _count(usage, "cache_read_input_tokens")
    written = _count(usage, "cache_creation_input_tokens")
    prompt = _count(usage, "input_tokens") + written + cached
    completion = _count(usage, "output_tokens")
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached, "cache_write_tokens": written},
        "completion_tokens_details": {"reasoning_tokens": 0},
    }


def to_chat_completion(message: Mapping[str, Any], *, created: int) -> JsonObject:
    """`message` (an Anthropic Message) as an OpenAI chat.completion made at `created` (unix s)."""
    blocks = [b for b in message.get("content") or () if isinstance(b, dict)]
    text = "".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")
    tool_calls = [
        {
            "id": b.get("id"),
            "type": "function",
            "function": {"name": b.get("name"), "arguments": json_text(b.get("input", {}))},
        }
        for b in blocks
        if b.get("type") == "tool_use"
    ]
    reply: JsonObject = {
        "role": "assistant",
        "content": text if text or not tool_calls else None,
        "refusal": None,
    }
    if tool_calls:
        reply["tool_calls"] = tool_calls
    usage = message.get("usage")
    return {
        "id": message.get("id"),
        "object": "chat.completion",
        "created": created,
        "model": message.get("model"),
        "choices": [
            {
                "index": 0,
                "message": reply,
                "logprobs": None,
                "finish_reason": FINISH_REASONS.get(str(message.get("stop_reason")), "stop"),
            }
        ],
        "usage": _chat_usage(usage if isinstance(usage, dict) else {}),
    }


def _message_id(completion: Mapping[str, Any]) -> str:
    """`msg_` + the completion's id (stable: the same answer always gets the same id)."""
    ident = completion.get("id")
    if isinstance(ident, str) and ident:
        return ident if ident.startswith("msg_") else "msg_" + ident.removeprefix("chatcmpl-")
    canonical = json.dumps(completion, sort_keys=True, default=str).encode()
    return "msg_" + hashlib.sha256(canonical).hexdigest()[:24]


def _text_blocks(content: Any) -> list[JsonObject]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    if isinstance(content, list):  # some servers answer with a list of text parts
        texts = (p.get("text") for p in content if isinstance(p, dict) and p.get("type") == "text")
        return [{"type": "text", "text": t} for t in texts if isinstance(t, str) and t]
    return []


def _tool_use(call: Any, param: str) -> JsonObject:
    function = call.get("function") if isinstance(call, dict) else None
    if (
        not isinstance(call, dict)
        or not isinstance(function, dict)
        or not isinstance(function.get("name"), str)
    ):
        raise Untranslatable("The upstream answered with a tool call that has no function name.", param)
    raw = function.get("arguments")
    try:
        arguments = json_object(raw, param=f"{param}.function.arguments", what="Tool call arguments")
    except Untranslatable as exc:
        shown = clip(raw if isinstance(raw, str) else json_text(raw), RAW_ARGUMENTS_SHOWN)
        raise Untranslatable(
            f"The upstream called tool {function['name']!r} with arguments that are not a JSON "
            f"object: {shown}",
            exc.param,
        ) from None
    return {"type": "tool_use", "id": str(call.get("id") or ""), "name": function["name"], "input": arguments}


def _stop(choice: Mapping[str, Any], has_tool_calls: bool, refused: bool) -> tuple[str, str | None]:
    """(stop_reason, stop_sequence) of one choice."""
    finish = choice.get("finish_reason")
    if refused:
        return "refusal", None
    if has_tool_calls and finish in ("stop", "tool_calls", "function_call"):
        return "tool_use", None  # vLLM says "stop" after a forced (named) tool call
    matched = choice.get("stop_reason")  # vLLM: the stop string that ended the answer
    if finish == "stop" and isinstance(matched, str):
        return "stop_sequence", matched
    return STOP_REASONS.get(str(finish), "end_turn"), None


def _message_usage(usage: Any) -> JsonObject:
    usage = usage if isinstance(usage, dict) else {}
    details = usage.get("prompt_tokens_details")
    details = details if isinstance(details, dict) else {}
    cached = _count(details, "cached_tokens")
    written = _count(details, "cache_write_tokens")
    return {
        "input_tokens": max(_count(usage, "prompt_tokens") - cached - written, 0),
        "output_tokens": _count(usage, "completion_tokens"),
        "cache_creation_input_tokens": written,
        "cache_read_input_tokens": cached,
    }


def to_anthropic_message(completion: Mapping[str, Any], *, model: str | None = None) -> JsonObject:
    """`completion` (an OpenAI chat.completion) as an Anthropic Message; `model` is the name to
    report (the one the request asked for), else the completion's own."""
    choices = completion.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices else None
    message = choice.get("message") if isinstance(choice, dict) else None
    if not isinstance(choice, dict) or not isinstance(message, dict):
        raise Untranslatable("The upstream answered without a choice holding a message.", "choices")
    refusal = message.get("refusal")
    content = _text_blocks(message.get("content")) + _text_blocks(refusal)
    calls = message.get("tool_calls") or []
    if not isinstance(calls, list):
        raise Untranslatable("The upstream answered with 'tool_calls' that are not a list.", "choices[0]")
    param = "choices[0].message.tool_calls"
    content += [_tool_use(call, f"{param}[{number}]") for number, call in enumerate(calls)]
    stop_reason, stop_sequence = _stop(choice, bool(calls), isinstance(refusal, str) and bool(refusal))
    return {
        "id": _message_id(completion),
        "type": "message",
        "role": "assistant",
        "model": model or str(completion.get("model") or ""),
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": stop_sequence,
        "usage": _message_usage(completion.get("usage")),
    }
