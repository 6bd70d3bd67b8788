"""The hold's input estimate: UTF-8 bytes of every string under the text fields, at any depth,
over `BYTES_PER_TOKEN` (and a token per token id), plus `TOKENS_PER_MESSAGE` of framing per
message; and its output side, every answer a request is billed for."""

from __future__ import annotations

import math
from typing import Any

import orjson
import pytest

from batchgate.services.common.record_texts import BYTES_PER_TOKEN, TOKENS_PER_MESSAGE, estimate_input_tokens
from batchgate.services.common.token_usage import output_allowance


def tokens(text_bytes: int, messages: int = 1) -> int:
    return math.ceil(text_bytes / BYTES_PER_TOKEN) + TOKENS_PER_MESSAGE * messages


def test_every_string_of_the_messages_counts_whatever_its_depth() -> None:
    body = {
        "model": "a-model-name-that-is-not-text",
        "messages": [
            {"role": "system", "content": "be brief"},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "hello"},
                    {"type": "image_url", "image_url": {"url": "u"}},
                ],
            },
        ],
        "max_tokens": 5,
    }
    strings = ["system", "be brief", "user", "text", "hello", "image_url", "u"]
    assert estimate_input_tokens(body) == tokens(sum(map(len, strings)), messages=2)


def test_text_is_counted_in_utf8_bytes() -> None:
    body = {"messages": [{"role": "user", "content": "héllo ✓"}]}
    assert estimate_input_tokens(body) == tokens(len("user") + len("héllo ✓".encode()))


def test_input_prompt_and_system_count_and_nothing_else_does() -> None:
    body = {
        "input": ["ab", "cde"],
        "prompt": "f",
        "system": [{"type": "text", "text": "gh"}],
        "user": "not counted",
    }
    assert estimate_input_tokens(body) == tokens(2 + 3 + 1 + len("text") + 2)


def test_token_ids_count_a_token_each_and_other_numbers_and_nulls_nothing() -> None:
    assert estimate_input_tokens({"input": [1, 2.5, None, True]}) == tokens(BYTES_PER_TOKEN)
    assert estimate_input_tokens({"input": [[15339] * 500] * 2}) == tokens(1000 * BYTES_PER_TOKEN)
    assert estimate_input_tokens({"prompt": [15339] * 1000}) == tokens(1000 * BYTES_PER_TOKEN)


@pytest.mark.parametrize(
    ("body", "answers"),
    [
        ({"max_tokens": 10}, 1),
        ({"max_tokens": 10, "n": 5}, 5),
        ({"max_tokens": 10, "prompt": ["a", "b", "c"]}, 3),
        ({"max_tokens": 10, "prompt": [[1, 2], [3]], "n": 2}, 4),
        ({"max_tokens": 10, "prompt": [1, 2, 3]}, 1),  # one prompt of token ids
        ({"max_tokens": 10, "best_of": 4, "n": 2}, 4),
        ({"max_tokens": 10, "n": True}, 1),
    ],
)
def test_the_output_allowance_counts_every_answer_billed(body: dict[str, Any], answers: int) -> None:
    """`n: 5` or a list of prompts held one answer's output and spent five."""
    assert output_allowance(body, 4096) == 10 * answers
    assert output_allowance({k: v for k, v in body.items() if k != "max_tokens"}, 7) == 7 * answers


def test_the_responses_instructions_and_the_completions_suffix_count() -> None:
    """The hold ignored `instructions`: a key could run a long system prompt past its budget."""
    instructions = "hello world " * 2500
    body = {"model": "m", "instructions": instructions, "input": "hi", "max_output_tokens": 1}
    assert estimate_input_tokens(body) == tokens(len(instructions) + 2)
    assert estimate_input_tokens({"prompt": "ab", "suffix": "cde"}) == tokens(5)


def test_tool_definitions_and_output_formats_count_as_their_json() -> None:
    tools = [{"type": "function", "function": {"name": "f", "description": "d" * 300}}]
    schema = {"format": {"type": "json_schema", "name": "s", "schema": {"type": "object"}}}
    body = {"messages": [{"role": "user", "content": "hi"}], "tools": tools, "text": schema}
    json_bytes = len(orjson.dumps(tools)) + len(orjson.dumps(schema))
    assert estimate_input_tokens(body) == tokens(len("user") + 2 + json_bytes)
