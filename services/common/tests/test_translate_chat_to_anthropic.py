"""OpenAI chat request → Anthropic Messages request (what the executor sends to an Anthropic
upstream): one table row per rule, each output checked against the anthropic SDK's type."""

from __future__ import annotations

from typing import Any

import pytest

from batchgate.services.common.tests.sdk_shapes import assert_anthropic_params, assert_openai_params
from batchgate.services.common.translate.chat_to_anthropic import to_anthropic_request
from batchgate.services.common.translate.shared import Untranslatable

USER = {"role": "user", "content": "Hi"}
TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
ANTHROPIC_TOOL = {
    "name": "get_weather",
    "description": "Weather for a city",
    "input_schema": TOOL["function"]["parameters"],  # type: ignore[index]
}


def body(**fields: Any) -> dict[str, Any]:
    return {"model": "gpt-ish", "messages": [USER], **fields}


def translate(request: dict[str, Any], default_max_tokens: int = 4096) -> dict[str, Any]:
    out = to_anthropic_request(request, model="claude-upstream", default_max_tokens=default_max_tokens)
    assert_anthropic_params(out)
    return out


def call(ident: str, city: str) -> dict[str, Any]:
    arguments = f'{{"city": "{city}"}}'
    return {"id": ident, "type": "function", "function": {"name": "get_weather", "arguments": arguments}}


# (rule, OpenAI request, the Anthropic request's fields that rule decides)
MAPPINGS: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    (
        "model is the upstream's name; max_tokens from the provider's default",
        body(),
        {
            "model": "claude-upstream",
            "max_tokens": 4096,
            "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
        },
    ),
    (
        "max_completion_tokens wins over max_tokens",
        body(max_completion_tokens=50, max_tokens=999),
        {"max_tokens": 50},
    ),
    ("max_tokens", body(max_tokens=70), {"max_tokens": 70}),
    (
        "system and developer messages become the system prompt; same-role turns merge",
        body(
            messages=[
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Hi"},
                {"role": "user", "content": [{"type": "text", "text": "there"}]},
                {"role": "developer", "content": [{"type": "text", "text": "Answer in French."}]},
                {"role": "assistant", "content": "Bonjour"},
                {"role": "user", "content": "Again"},
            ]
        ),
        {
            "system": "Be brief.\n\nAnswer in French.",
            "messages": [
                {
                    "role": "user",
                    "content": [{"type": "text", "text": "Hi"}, {"type": "text", "text": "there"}],
                },
                {"role": "assistant", "content": [{"type": "text", "text": "Bonjour"}]},
                {"role": "user", "content": [{"type": "text", "text": "Again"}]},
            ],
        },
    ),
    (
        "a system part with cache_control keeps the system as blocks",
        body(
            messages=[
                {
                    "role": "system",
                    "content": [{"type": "text", "text": "S", "cache_control": {"type": "ephemeral"}}],
                },
                USER,
            ]
        ),
        {"system": [{"type": "text", "text": "S", "cache_control": {"type": "ephemeral"}}]},
    ),
    ("temperature clamped to 1", body(temperature=1.7), {"temperature": 1.0}),
    ("temperature within range as is", body(temperature=0.2, top_p=0.9), {"temperature": 0.2, "top_p": 0.9}),
    ("stop string to stop_sequences", body(stop="END"), {"stop_sequences": ["END"]}),
    ("stop list to stop_sequences", body(stop=["a", "b"]), {"stop_sequences": ["a", "b"]}),
    ("user to metadata.user_id", body(user="user-42"), {"metadata": {"user_id": "user-42"}}),
    (
        "sampling and bookkeeping fields without an equivalent are dropped",
        body(
            seed=7,
            frequency_penalty=0.5,
            presence_penalty=0.1,
            logit_bias={},
            store=True,
            stream=False,
            metadata={"a": "b"},
        ),
        {"seed": None, "frequency_penalty": None, "stream": None, "store": None, "metadata": None},
    ),
    (
        "Anthropic-only fields ride along",
        body(top_k=5, thinking={"type": "disabled"}),
        {"top_k": 5, "thinking": {"type": "disabled"}},
    ),
    ("tools to input_schema tools", body(tools=[TOOL]), {"tools": [ANTHROPIC_TOOL]}),
    ("tool_choice auto", body(tools=[TOOL], tool_choice="auto"), {"tool_choice": {"type": "auto"}}),
    (
        "tool_choice required to any",
        body(tools=[TOOL], tool_choice="required"),
        {"tool_choice": {"type": "any"}},
    ),
    ("tool_choice none", body(tools=[TOOL], tool_choice="none"), {"tool_choice": {"type": "none"}}),
    (
        "a named function to tool, parallel_tool_calls false to disable_parallel_tool_use",
        body(
            tools=[TOOL],
            tool_choice={"type": "function", "function": {"name": "get_weather"}},
            parallel_tool_calls=False,
        ),
        {"tool_choice": {"type": "tool", "name": "get_weather", "disable_parallel_tool_use": True}},
    ),
    (
        "parallel_tool_calls false alone to auto without parallel use",
        body(tools=[TOOL], parallel_tool_calls=False),
        {"tool_choice": {"type": "auto", "disable_parallel_tool_use": True}},
    ),
    (
        "tool_calls to tool_use, tool messages to one user turn of tool_result blocks",
        body(
            tools=[TOOL],
            messages=[
                {"role": "user", "content": "Weather in Paris and Rome?"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [call("call_1", "Paris"), call("call_2", "Rome")],
                },
                {"role": "tool", "tool_call_id": "call_1", "content": "Sunny"},
                {"role": "tool", "tool_call_id": "call_2", "content": [{"type": "text", "text": "Rain"}]},
                {"role": "user", "content": "Thanks, summarise."},
            ],
        ),
        {
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "Weather in Paris and Rome?"}]},
                {
                    "role": "assistant",
                    "content": [
                        {
                            "type": "tool_use",
                            "id": "call_1",
                            "name": "get_weather",
                            "input": {"city": "Paris"},
                        },
                        {
                            "type": "tool_use",
                            "id": "call_2",
                            "name": "get_weather",
                            "input": {"city": "Rome"},
                        },
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "call_1", "content": "Sunny"},
                        {
                            "type": "tool_result",
                            "tool_use_id": "call_2",
                            "content": [{"type": "text", "text": "Rain"}],
                        },
                        {"type": "text", "text": "Thanks, summarise."},
                    ],
                },
            ]
        },
    ),
    (
        "images and PDFs become blocks; cache_control kept",
        body(
            messages=[
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "What is this?", "cache_control": {"type": "ephemeral"}},
                        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
                        {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}},
                        {"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBERi0x"}},
                    ],
                }
            ]
        ),
        {
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "What is this?", "cache_control": {"type": "ephemeral"}},
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
                        },
                        {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}},
                        {
                            "type": "document",
                            "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0x"},
                        },
                    ],
                }
            ]
        },
    ),
    (
        "empty assistant text is left out (Anthropic refuses empty text blocks)",
        body(messages=[USER, {"role": "assistant", "content": ""}, {"role": "user", "content": "More"}]),
        {
            "messages": [
                {
                    "role": "user",
                    "content": [{"type": "text", "text": "Hi"}, {"type": "text", "text": "More"}],
                }
            ]
        },
    ),
]


# Inputs that carry Anthropic's own fields (cache_control, top_k, thinking) beyond OpenAI's types.
EXTENDED_INPUTS = frozenset(
    {
        "a system part with cache_control keeps the system as blocks",
        "Anthropic-only fields ride along",
        "images and PDFs become blocks; cache_control kept",
    }
)


@pytest.mark.parametrize(("rule", "request_body", "expected"), MAPPINGS, ids=[m[0] for m in MAPPINGS])
def test_each_field_maps(rule: str, request_body: dict[str, Any], expected: dict[str, Any]) -> None:
    if rule not in EXTENDED_INPUTS:
        assert_openai_params(request_body)  # the input is what the openai SDK sends
    out = translate(request_body)
    for key, value in expected.items():
        assert out.get(key) == value, key


# (rule, OpenAI request, the param the refusal names)
REFUSALS: list[tuple[str, dict[str, Any], str]] = [
    ("n above 1", body(n=2), "n"),
    ("log probabilities", body(logprobs=True), "logprobs"),
    ("JSON response_format", body(response_format={"type": "json_object"}), "response_format"),
    ("audio output", body(modalities=["text", "audio"]), "modalities"),
    ("legacy functions", body(functions=[{"name": "f"}]), "functions"),
    ("a function-role message", body(messages=[{"role": "function", "content": "x"}]), "messages[0]"),
    ("audio input", body(messages=[{"role": "user", "content": [{"type": "input_audio"}]}]), "messages[0]"),
    (
        "tool call arguments that are not an object",
        body(
            messages=[{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "[1]"}}]}]
        ),
        "messages[0]",
    ),
    (
        "a non-PDF file",
        body(
            messages=[
                {
                    "role": "user",
                    "content": [{"type": "file", "file": {"file_data": "data:text/plain;base64,eA=="}}],
                }
            ]
        ),
        "messages[0]",
    ),
    (
        "an image that is not a URL",
        body(
            messages=[{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "ftp://x"}}]}]
        ),
        "messages[0]",
    ),
    ("no messages", body(messages=[]), "messages"),
    ("non-function tools", body(tools=[{"type": "custom", "custom": {"name": "x"}}]), "tools"),
    ("an unknown tool_choice", body(tool_choice="sometimes"), "tool_choice"),
    ("a temperature that is not a number", body(temperature="hot"), "temperature"),
]


@pytest.mark.parametrize(("rule", "request_body", "param"), REFUSALS, ids=[r[0] for r in REFUSALS])
def test_what_has_no_equivalent_is_refused_naming_the_parameter(
    rule: str, request_body: dict[str, Any], param: str
) -> None:
    with pytest.raises(Untranslatable) as caught:
        translate(request_body)
    assert caught.value.param == param and caught.value.message
