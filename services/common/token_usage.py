"""Token usage from an answer: OpenAI's shapes (chat/completions/embeddings or responses) or an
Anthropic Message (a Message Batch item's), as the executor reads it from each answer and the
scheduler from a provider batch's output lines, and the sums of several answers' usage (tool
loops, workflows). Also the most output a request allows (`output_allowance`), read the same
way by ingest's budget holds and dry-run estimates and the executor's token pacing."""

from __future__ import annotations

from typing import Any

from batchgate.internal.v1 import recorder_pb2


def _int(value: Any) -> int:
    """`value` where it is a positive count (a JSON `true` is not one), else 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def output_allowance(body: dict[str, Any], default: int) -> int:
    """The most output tokens a request may produce: what it sets per answer, else `default`,
    times the answers it asks for (`answers`)."""
    for name in ("max_completion_tokens", "max_tokens", "max_output_tokens"):
        if value := _int(body.get(name)):
            return value * answers(body)
    return default * answers(body)


def answers(body: dict[str, Any]) -> int:
    """The answers a request is billed for: `n` (chat, completions) or a completion's
    `best_of` (all of them are generated), for each prompt of a completions `prompt` list (a
    list of texts or of token lists; a list of numbers is one prompt). Each answer may use the
    whole `max_tokens`: a hold of one let `n: 5` spend five times it."""
    prompt = body.get("prompt")
    prompts = len(prompt) if isinstance(prompt, list) and prompt and isinstance(prompt[0], str | list) else 1
    return max(_int(body.get("n")), _int(body.get("best_of")), 1) * prompts


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


def total_tokens(usage: recorder_pb2.TokenUsage | None) -> int:
    """Prompt and completion tokens of `usage` (a loop's sum so far; None: nothing yet), what a
    tool_config's or workflow's `max_tokens` bounds."""
    return 0 if usage is None else usage.prompt_tokens + usage.completion_tokens


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
