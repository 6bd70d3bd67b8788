"""Answers both ways, Anthropic Message ↔ OpenAI chat.completion: one table row per rule,
each output parsed by the receiving SDK's own model."""

from __future__ import annotations

from typing import Any

import pytest

from batchgate.services.common.tests.sdk_shapes import assert_anthropic_message, assert_chat_completion
from batchgate.services.common.translate.responses import to_anthropic_message, to_chat_completion
from batchgate.services.common.translate.shared import Untranslatable

CREATED = 1_700_000_000


def message(**fields: Any) -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-upstream",
        "content": [{"type": "text", "text": "Hello"}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5},
        **fields,
    }


def completion(message_fields: dict[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
    reply = {"role": "assistant", "content": "Hello", "refusal": None, **(message_fields or {})}
    return {
        "id": "chatcmpl-abc",
        "object": "chat.completion",
        "created": CREATED,
        "model": "qwen-upstream",
        "choices": [{"index": 0, "message": reply, "logprobs": None, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17},
        **fields,
    }


def choice(fields: dict[str, Any]) -> dict[str, Any]:
    return {"index": 0, "message": {"role": "assistant", "content": "x"}, "logprobs": None, **fields}


# Anthropic Message → chat.completion: (rule, Message, path into the completion, expected)
TO_CHAT: list[tuple[str, dict[str, Any], tuple[Any, ...], Any]] = [
    ("id and model kept", message(), ("id",), "msg_1"),
    (
        "text blocks joined into content",
        message(content=[{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]),
        ("choices", 0, "message", "content"),
        "ab",
    ),
    (
        "tool_use to tool_calls with JSON arguments; thinking left out",
        message(
            content=[
                {"type": "thinking", "thinking": "hmm", "signature": "s"},
                {"type": "text", "text": "Let me check. "},
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
            ],
            stop_reason="tool_use",
        ),
        ("choices", 0, "message"),
        {
            "role": "assistant",
            "content": "Let me check. ",
            "refusal": None,
            "tool_calls": [
                {
                    "id": "toolu_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                }
            ],
        },
    ),
    (
        "tool calls only: null content",
        message(content=[{"type": "tool_use", "id": "t", "name": "f", "input": {}}], stop_reason="tool_use"),
        ("choices", 0, "message", "content"),
        None,
    ),
    ("end_turn to stop", message(stop_reason="end_turn"), ("choices", 0, "finish_reason"), "stop"),
    (
        "stop_sequence to stop",
        message(stop_reason="stop_sequence", stop_sequence="END"),
        ("choices", 0, "finish_reason"),
        "stop",
    ),
    ("pause_turn to stop", message(stop_reason="pause_turn"), ("choices", 0, "finish_reason"), "stop"),
    ("max_tokens to length", message(stop_reason="max_tokens"), ("choices", 0, "finish_reason"), "length"),
    (
        "model_context_window_exceeded to length",
        message(stop_reason="model_context_window_exceeded"),
        ("choices", 0, "finish_reason"),
        "length",
    ),
    (
        "tool_use to tool_calls",
        message(stop_reason="tool_use"),
        ("choices", 0, "finish_reason"),
        "tool_calls",
    ),
    (
        "refusal to content_filter",
        message(stop_reason="refusal"),
        ("choices", 0, "finish_reason"),
        "content_filter",
    ),
    (
        "usage: prompt = input + cache creation + cache read; cached = read, written = creation",
        message(
            usage={
                "input_tokens": 10,
                "output_tokens": 7,
                "cache_creation_input_tokens": 3,
                "cache_read_input_tokens": 20,
            }
        ),
        ("usage",),
        {
            "prompt_tokens": 33,
            "completion_tokens": 7,
            "total_tokens": 40,
            "prompt_tokens_details": {"cached_tokens": 20, "cache_write_tokens": 3},
            "completion_tokens_details": {"reasoning_tokens": 0},
        },
    ),
    ("created is the caller's clock", message(), ("created",), CREATED),
]


def dig(value: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        value = value[step]
    return value


@pytest.mark.parametrize(("rule", "answer", "path", "expected"), TO_CHAT, ids=[r[0] for r in TO_CHAT])
def test_a_message_becomes_a_chat_completion(
    rule: str, answer: dict[str, Any], path: tuple[Any, ...], expected: Any
) -> None:
    assert_anthropic_message(answer)  # the input is what Anthropic answers
    out = to_chat_completion(answer, created=CREATED)
    assert_chat_completion(out)
    assert dig(out, path) == expected


CALL = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": '{"q": 1}'}}

# chat.completion → Anthropic Message: (rule, completion, path into the Message, expected)
TO_MESSAGE: list[tuple[str, dict[str, Any], tuple[Any, ...], Any]] = [
    ("id from the completion's, msg_-prefixed", completion(), ("id",), "msg_abc"),
    ("type, role", completion(), ("type",), "message"),
    ("content to a text block", completion(), ("content",), [{"type": "text", "text": "Hello"}]),
    ("empty content to no block", completion({"content": ""}), ("content",), []),
    (
        "reasoning_content left out",
        completion({"reasoning_content": "Let me think"}),
        ("content",),
        [{"type": "text", "text": "Hello"}],
    ),
    (
        "tool_calls to tool_use blocks with parsed input",
        completion(
            choices=[
                choice(
                    {
                        "message": {"role": "assistant", "content": None, "tool_calls": [CALL]},
                        "finish_reason": "tool_calls",
                    }
                )
            ]
        ),
        ("content",),
        [{"type": "tool_use", "id": "call_1", "name": "f", "input": {"q": 1}}],
    ),
    ("stop to end_turn", completion(), ("stop_reason",), "end_turn"),
    (
        "stop with vLLM's matched stop string to stop_sequence",
        completion(choices=[choice({"finish_reason": "stop", "stop_reason": "END"})]),
        ("stop_sequence",),
        "END",
    ),
    (
        "length to max_tokens",
        completion(choices=[choice({"finish_reason": "length"})]),
        ("stop_reason",),
        "max_tokens",
    ),
    (
        "tool_calls to tool_use",
        completion(choices=[choice({"finish_reason": "tool_calls"})]),
        ("stop_reason",),
        "tool_use",
    ),
    (
        "content_filter to refusal",
        completion(choices=[choice({"finish_reason": "content_filter"})]),
        ("stop_reason",),
        "refusal",
    ),
    (
        "a refusal to a text block and stop_reason refusal",
        completion({"content": None, "refusal": "I can't help with that."}),
        ("content",),
        [{"type": "text", "text": "I can't help with that."}],
    ),
    ("model: the name the request asked for", completion(), ("model",), "claude-asked"),
    (
        "usage: input = prompt - cached - written; cache read and creation",
        completion(
            usage={
                "prompt_tokens": 100,
                "completion_tokens": 9,
                "total_tokens": 109,
                "prompt_tokens_details": {"cached_tokens": 60, "cache_write_tokens": 15},
            }
        ),
        ("usage",),
        {
            "input_tokens": 25,
            "output_tokens": 9,
            "cache_creation_input_tokens": 15,
            "cache_read_input_tokens": 60,
        },
    ),
    (
        "no usage: zeros",
        completion(usage=None),
        ("usage",),
        {
            "input_tokens": 0,
            "output_tokens": 0,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
    ),
]


@pytest.mark.parametrize(("rule", "answer", "path", "expected"), TO_MESSAGE, ids=[r[0] for r in TO_MESSAGE])
def test_a_chat_completion_becomes_a_message(
    rule: str, answer: dict[str, Any], path: tuple[Any, ...], expected: Any
) -> None:
    assert_chat_completion(answer)  # the input is what an OpenAI-compatible server answers
    out = to_anthropic_message(answer, model="claude-asked" if rule.startswith("model") else None)
    assert_anthropic_message(out)
    assert dig(out, path) == expected


def test_a_refusal_stops_with_refusal_and_a_forced_tool_call_with_tool_use() -> None:
    refused = to_anthropic_message(completion({"content": None, "refusal": "No."}))
    assert refused["stop_reason"] == "refusal"
    forced = completion(
        {
            "content": None,
            "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
        }
    )
    assert forced["choices"][0]["finish_reason"] == "stop"  # what vLLM says after a named tool_choice
    assert to_anthropic_message(forced)["stop_reason"] == "tool_use"


def test_the_same_answer_always_gets_the_same_message_id() -> None:
    anonymous = completion()
    del anonymous["id"]
    first, again = to_anthropic_message(anonymous), to_anthropic_message(dict(anonymous))
    assert first["id"] == again["id"] and first["id"].startswith("msg_")
    assert to_anthropic_message(completion(choices=[choice({"finish_reason": "length"})]))["id"] == "msg_abc"


@pytest.mark.parametrize(
    ("rule", "answer", "param", "words"),
    [
        ("no choices", completion(choices=[]), "choices", "without a choice"),
        (
            "a choice without a message",
            completion(choices=[{"index": 0, "finish_reason": "stop"}]),
            "choices",
            "message",
        ),
        (
            "arguments that are not JSON",
            completion(
                {
                    "tool_calls": [
                        {"id": "c", "type": "function", "function": {"name": "f", "arguments": '{"q": '}}
                    ]
                }
            ),
            "choices[0].message.tool_calls[0].function.arguments",
            '{"q": ',
        ),
        (
            "arguments that are a JSON list",
            completion(
                {
                    "tool_calls": [
                        {"id": "c", "type": "function", "function": {"name": "f", "arguments": "[1]"}}
                    ]
                }
            ),
            "choices[0].message.tool_calls[0].function.arguments",
            "not a JSON object",
        ),
        (
            "a tool call without a name",
            completion({"tool_calls": [{"id": "c", "type": "function", "function": {"arguments": "{}"}}]}),
            "choices[0].message.tool_calls[0]",
            "no function name",
        ),
    ],
)
def test_an_answer_the_message_shape_cannot_hold_is_refused(
    rule: str, answer: dict[str, Any], param: str, words: str
) -> None:
    with pytest.raises(Untranslatable) as caught:
        to_anthropic_message(answer)
    assert caught.value.param == param and words in caught.value.message
