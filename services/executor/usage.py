"""Token usage from an answer: OpenAI's shapes (chat/completions/embeddings or responses) or an
Anthropic Message (a Message Batch item's), and the sums of several answers' usage (tool loops,
workflows)."""

from __future__ import annotations

from typing import Any

from batchgate.internal.v1 import recorder_pb2


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _message_usage(usage: dict[str, Any]) -> recorder_pb2.TokenUsage:
    """An Anthropic Message's usage: the prompt counts cache writes and reads too."""
    cached = _int(usage.get("cache_read_input_tokens"))
    written = _int(usage.get("cache_creation_input_tokens"))
    return recorder_pb2.TokenUsage(
        prompt_tokens=_int(usage.get("input_tokens")) + written + cached,
        completion_tokens=_int(usage.get("output_tokens")),
        cached_tokens=cached,
    )


def usage_of(body: Any) -> recorder_pb2.TokenUsage:
    usage = body.get("usage") if isinstance(body, dict) else None
    if not isinstance(usage, dict):
        return recorder_pb2.TokenUsage()
    if body.get("type") == "message":  # a Message Batch item's answer (Anthropic's shape)
        return _message_usage(usage)
    if "input_tokens" in usage:  # /v1/responses
        prompt = _int(usage.get("input_tokens"))
        completion = _int(usage.get("output_tokens"))
        prompt_details = usage.get("input_tokens_details") or {}
        completion_details = usage.get("output_tokens_details") or {}
    else:
        prompt = _int(usage.get("prompt_tokens"))
        completion = _int(usage.get("completion_tokens"))
        prompt_details = usage.get("prompt_tokens_details") or {}
        completion_details = usage.get("completion_tokens_details") or {}
    return recorder_pb2.TokenUsage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        cached_tokens=_int(prompt_details.get("cached_tokens")) if isinstance(prompt_details, dict) else 0,
        reasoning_tokens=_int(completion_details.get("reasoning_tokens"))
        if isinstance(completion_details, dict)
        else 0,
    )


SKIPPED_FOR_ESTIMATE = frozenset({"image_url", "file", "file_data", "input_audio", "data", "url"})
CHARS_PER_TOKEN = 4


def _text_chars(value: Any) -> int:
    if isinstance(value, str):
        return len(value)
    if isinstance(value, list):
        return sum(_text_chars(v) for v in value)
    if isinstance(value, dict):
        return sum(_text_chars(v) for k, v in value.items() if k not in SKIPPED_FOR_ESTIMATE)
    return 0


def estimate_tokens(body: Any) -> int:
    """What a call will cost against a tokens/min budget, before it is made: the request's text
    at ~4 characters a token (images and files left out) plus the most it may generate. The
    answer's usage corrects it afterwards."""
    if not isinstance(body, dict):
        return 0
    text = sum(_text_chars(body.get(k)) for k in ("messages", "input", "prompt", "instructions", "tools"))
    most = body.get("max_completion_tokens") or body.get("max_tokens") or body.get("max_output_tokens")
    return text // CHARS_PER_TOKEN + 1 + (most if isinstance(most, int) and most > 0 else 0)


def add_usage(total: recorder_pb2.TokenUsage, usage: recorder_pb2.TokenUsage) -> None:
    """Adds `usage` into `total`."""
    total.prompt_tokens += usage.prompt_tokens
    total.completion_tokens += usage.completion_tokens
    total.cached_tokens += usage.cached_tokens
    total.reasoning_tokens += usage.reasoning_tokens


def usage_json(usage: recorder_pb2.TokenUsage) -> dict[str, Any]:
    """A summed usage as a chat answer's `usage` object."""
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.prompt_tokens + usage.completion_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cached_tokens},
        "completion_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
    }
