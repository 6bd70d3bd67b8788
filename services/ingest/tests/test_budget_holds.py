"""The hold's input estimate: UTF-8 bytes of every string under the text fields, at any depth,
over `BYTES_PER_TOKEN`, plus `TOKENS_PER_MESSAGE` of framing per message."""

from __future__ import annotations

import math

import orjson

from batchgate.services.common.record_texts import BYTES_PER_TOKEN, TOKENS_PER_MESSAGE, estimate_input_tokens


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


def test_numbers_and_nulls_are_not_text() -> None:
    assert estimate_input_tokens({"input": [1, 2.5, None, True]}) == tokens(0)


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
