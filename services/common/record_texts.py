"""Where a record's prompt text lives, for every endpoint's shape: one list for the estimate,
the budget hold and the guardrails, so that none of them misses a field the others see.

Prompt fields (top level of a request body), whatever the endpoint:

- `messages`: chat completions and Anthropic Messages;
- `system`: Anthropic Messages (a string or text blocks);
- `input`: embeddings (strings) and the Responses API (a string or a list of items);
- `instructions`: the Responses API's system prompt;
- `prompt` and `suffix`: completions.

Within them, a text is a string, a list of texts, or what `TEXT_KEYS` name in an object that
has a `role` or a `type` (a message, a content part or block, an input item): `content` and
`text` (messages, `text`/`input_text`/`output_text` parts, Anthropic `tool_result` content) and
`output` (the Responses API's `function_call_output` and other tool-call outputs).

Structured fields (`STRUCTURED_FIELDS`) are billed as input too, so the estimate and the hold
count them (as their compact JSON text, `structured_json`); they are definitions, not prompt
text, and the guardrails leave them alone.

`estimate_input_tokens` is the budget hold's input side, and the executor's too: a tool or
workflow record checks it before each model call against its `max_tokens`, which its hold is.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

import orjson

from batchgate.services.common.token_usage import output_allowance

PROMPT_FIELDS = ("messages", "system", "input", "instructions", "prompt", "suffix")
"""Top-level fields whose texts are prompt text (filtered by the guardrails, counted by the
estimate and the hold)."""
MESSAGE_FIELDS = ("messages", "input")
"""Prompt fields that may be a list of messages or items (counted per message by the estimate)."""
TEXT_KEYS = ("content", "text", "output")
"""The keys of a message, part, block or item (an object with `role` or `type`) that hold text."""
STRUCTURED_FIELDS = ("tools", "functions", "response_format", "text")
"""Top-level fields billed as input but not prompt text: tool definitions and output formats."""


def structured_json(body: Mapping[str, Any]) -> Iterator[bytes]:
    """The compact JSON text of each structured field `body` has, as the upstream bills it (an
    accepted record always encodes: the record checker stored it with orjson)."""
    for field in STRUCTURED_FIELDS:
        if field in body:
            yield orjson.dumps(body[field])


BYTES_PER_TOKEN = 3
"""Input tokens are estimated as UTF-8 bytes of message text / this (tokenizers average about
four bytes per token on English; three errs towards holding too much)."""
TOKENS_PER_MESSAGE = 8
"""Role and framing tokens a message adds beyond its text."""


def _text_bytes(value: Any) -> int:
    """UTF-8 bytes of the strings in `value`, at any depth, and `BYTES_PER_TOKEN` for each
    integer: embeddings and completions take token ids (lists of integers) as input, billed a
    token each, which counted as nothing and let a key spend 80 times its budget. One call per
    value, with no generators: the estimate runs for every record a create accepts."""
    if isinstance(value, str):
        return len(value) if value.isascii() else len(value.encode())  # isascii(): a flag, no copy
    if isinstance(value, int) and not isinstance(value, bool):
        return BYTES_PER_TOKEN
    total = 0
    if isinstance(value, list):
        for entry in value:
            total += _text_bytes(entry)
    elif isinstance(value, dict):
        for entry in value.values():
            total += _text_bytes(entry)
    return total


def estimate_input_tokens(body: dict[str, Any]) -> int:
    """Input tokens of a request body, estimated from its text (the hold's input side): every
    string under its prompt fields (`record_texts.PROMPT_FIELDS`: messages, system,
    instructions, input, prompt, suffix), and its tool definitions and output formats
    (`STRUCTURED_FIELDS`) as their compact JSON text, as the upstream bills them."""
    text_bytes = 0
    for field in PROMPT_FIELDS:
        text_bytes += _text_bytes(body.get(field))
    text_bytes += sum(map(len, structured_json(body)))
    messages = body.get("messages")
    framing = TOKENS_PER_MESSAGE * (len(messages) if isinstance(messages, list) else 1)
    return math.ceil(text_bytes / BYTES_PER_TOKEN) + framing


def request_tokens(body: dict[str, Any], output_default: int) -> int:
    """The most tokens one call of `body` is held for: its estimated input and all the output it
    may produce (what it sets, else `output_default`, its model's `hold_max_tokens`)."""
    return estimate_input_tokens(body) + output_allowance(body, output_default)
