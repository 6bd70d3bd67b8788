"""The hold's input estimate: UTF-8 bytes of every string under the text fields, at any depth,
over `BYTES_PER_TOKEN`, plus `TOKENS_PER_MESSAGE` of framing per message."""

from __future__ import annotations

import math

from batchgate.services.ingest.budget_holds import BYTES_PER_TOKEN, TOKENS_PER_MESSAGE, estimate_input_tokens


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
