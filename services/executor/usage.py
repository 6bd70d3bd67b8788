"""Estimating a request's tokens before it is sent (answers' usage and their sums:
`common.token_usage`)."""

from __future__ import annotations

from typing import Any

from batchgate.services.common.token_usage import output_allowance

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
    return text // CHARS_PER_TOKEN + 1 + output_allowance(body, 0)
