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
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import orjson

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
