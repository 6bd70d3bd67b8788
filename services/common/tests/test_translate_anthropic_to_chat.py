"""Anthropic Messages request → OpenAI chat request: one table row per rule, each output
checked against the openai SDK's request type."""

from __future__ import annotations

from typing import Any

import pytest

from batchgate.services.common.tests.sdk_shapes import assert_anthropic_params, assert_openai_params
from batchgate.services.common.translate.anthropic_to_chat import ChatTarget, to_chat_request
from batchgate.services.common.translate.shared import Untranslatable

OPENAI = ChatTarget()
VLLM = ChatTarget(vllm_extensions=True)
REASONING = ChatTarget(max_tokens_field="max_completion_tokens")
USER = {"role": "user", "content": "Hi"}
TOOL = {
    "name": "get_weather",
    "description": "Weather for a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
FUNCTION = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": TOOL["input_schema"],
        "description": "Weather for a city",
    },
}
PNG = "iVBORw0KGgo="


def params(**fields: Any) -> dict[str, Any]:
    return {"model": "claude-x", "max_tokens": 100, "messages": [USER], **fields}


def translate(body: dict[str, Any], target: ChatTarget = OPENAI) -> dict[str, Any]:
    out = to_chat_request(body, model="upstream-model", target=target)
    assert_openai_params(out)
    return out


# (rule, Anthropic params, target, the OpenAI request's fields that rule decides)
MAPPINGS: list[tuple[str, dict[str, Any], ChatTarget, dict[str, Any]]] = [
    (
        "model is the upstream's name, max_tokens as is",
        params(),
        OPENAI,
        {"model": "upstream-model", "max_tokens": 100, "messages": [{"role": "user", "content": "Hi"}]},
    ),
    (
        "max_tokens to max_completion_tokens for reasoning models",
        params(),
        REASONING,
        {"max_completion_tokens": 100},
    ),
    (
        "system string leads as a system message",
        params(system="Be brief."),
        OPENAI,
        {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]},
    ),
    (
        "system text blocks become text parts, cache_control dropped",
        params(
            system=[
                {"type": "text", "text": "A"},
                {"type": "text", "text": "B", "cache_control": {"type": "ephemeral"}},
            ]
        ),
        OPENAI,
        {
            "messages": [
                {"role": "system", "content": [{"type": "text", "text": "A"}, {"type": "text", "text": "B"}]},
                {"role": "user", "content": "Hi"},
            ]
        },
    ),
    (
        "a system turn stays a system message where it is",
        params(
            messages=[
                USER,
                {"role": "system", "content": "Now in French."},
                {"role": "user", "content": "Again"},
            ]
        ),
        OPENAI,
        {
            "messages": [
                {"role": "user", "content": "Hi"},
                {"role": "system", "content": "Now in French."},
                {"role": "user", "content": "Again"},
            ]
        },
    ),
    ("stop_sequences to stop", params(stop_sequences=["END", "STOP"]), OPENAI, {"stop": ["END", "STOP"]}),
    ("empty stop_sequences left out", params(stop_sequences=[]), OPENAI, {"stop": None}),
    (
        "temperature and top_p as they are",
        params(temperature=0.3, top_p=0.9),
        OPENAI,
        {"temperature": 0.3, "top_p": 0.9},
    ),
    ("top_k as vLLM's extension", params(top_k=40), VLLM, {"top_k": 40}),
    ("metadata.user_id to user", params(metadata={"user_id": "u-42"}), OPENAI, {"user": "u-42"}),
    ("metadata without user_id adds nothing", params(metadata={}), OPENAI, {"user": None}),
    ("tools to function tools", params(tools=[TOOL]), OPENAI, {"tools": [FUNCTION]}),
    (
        "a strict tool stays strict",
        params(tools=[{**TOOL, "strict": True, "cache_control": {"type": "ephemeral"}}]),
        OPENAI,
        {"tools": [{"type": "function", "function": {**FUNCTION["function"], "strict": True}}]},
    ),
    ("tool_choice auto", params(tools=[TOOL], tool_choice={"type": "auto"}), OPENAI, {"tool_choice": "auto"}),
    (
        "tool_choice any to required",
        params(tools=[TOOL], tool_choice={"type": "any"}),
        OPENAI,
        {"tool_choice": "required"},
    ),
    ("tool_choice none", params(tools=[TOOL], tool_choice={"type": "none"}), OPENAI, {"tool_choice": "none"}),
    (
        "tool_choice tool to a named function",
        params(tools=[TOOL], tool_choice={"type": "tool", "name": "get_weather"}),
        OPENAI,
        {"tool_choice": {"type": "function", "function": {"name": "get_weather"}}},
    ),
    (
        "disable_parallel_tool_use to parallel_tool_calls false",
        params(tools=[TOOL], tool_choice={"type": "auto", "disable_parallel_tool_use": True}),
        OPENAI,
        {"tool_choice": "auto", "parallel_tool_calls": False},
    ),
    (
        "output_config.format to a strict json_schema response_format",
        params(output_config={"format": {"type": "json_schema", "schema": {"type": "object"}}}),
        OPENAI,
        {
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "output", "schema": {"type": "object"}, "strict": True},
            }
        },
    ),
    (
        "output_config.effort to reasoning_effort",
        params(output_config={"effort": "high"}),
        OPENAI,
        {"reasoning_effort": "high"},
    ),
    (
        "hints that change no answer are left out",
        params(
            cache_control={"type": "ephemeral"},
            service_tier="standard_only",
            stream=False,
            thinking={"type": "disabled"},
            speed="standard",
        ),
        OPENAI,
        {"cache_control": None, "service_tier": None, "stream": None, "thinking": None, "speed": None},
    ),
    (
        "a user turn of blocks becomes content parts",
        params(
            messages=[
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "What is this?", "cache_control": {"type": "ephemeral"}},
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": "image/png", "data": PNG},
                        },
                        {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}},
                        {
                            "type": "document",
                            "title": "report.pdf",
                            "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0x"},
                        },
                    ],
                }
            ]
        ),
        OPENAI,
        {
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "What is this?"},
                        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
                        {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}},
                        {
                            "type": "file",
                            "file": {
                                "filename": "report.pdf",
                                "file_data": "data:application/pdf;base64,JVBERi0x",
                            },
                        },
                    ],
                }
            ]
        },
    ),
    (
        "tool_use to tool_calls, tool_result to tool messages before the rest of the turn",
        params(
            tools=[TOOL],
            messages=[
                {"role": "user", "content": "Weather in Paris and Rome?"},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "thinking", "thinking": "Two calls.", "signature": "sig"},
                        {"type": "text", "text": "Checking."},
                        {
                            "type": "tool_use",
                            "id": "toolu_1",
                            "name": "get_weather",
                            "input": {"city": "Paris"},
                        },
                        {
                            "type": "tool_use",
                            "id": "toolu_2",
                            "name": "get_weather",
                            "input": {"city": "Rome"},
                        },
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "Sunny"},
                        {
                            "type": "tool_result",
                            "tool_use_id": "toolu_2",
                            "content": [{"type": "text", "text": "Rain"}],
                            "is_error": False,
                        },
                        {"type": "text", "text": "Summarise."},
                    ],
                },
            ],
        ),
        OPENAI,
        {
            "messages": [
                {"role": "user", "content": "Weather in Paris and Rome?"},
                {
                    "role": "assistant",
                    "content": [{"type": "text", "text": "Checking."}],
                    "tool_calls": [
                        {
                            "id": "toolu_1",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                        },
                        {
                            "id": "toolu_2",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": '{"city":"Rome"}'},
                        },
                    ],
                },
                {"role": "tool", "tool_call_id": "toolu_1", "content": "Sunny"},
                {"role": "tool", "tool_call_id": "toolu_2", "content": [{"type": "text", "text": "Rain"}]},
                {"role": "user", "content": [{"type": "text", "text": "Summarise."}]},
            ]
        },
    ),
    (
        "an assistant turn of tool calls only has null content",
        params(
            messages=[
                USER,
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t"}]},
            ]
        ),
        OPENAI,
        {
            "messages": [
                {"role": "user", "content": "Hi"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": "t", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                    ],
                },
                {"role": "tool", "tool_call_id": "t", "content": ""},
            ]
        },
    ),
    (
        "a final assistant turn (prefill) is continued through vLLM's extension",
        params(messages=[USER, {"role": "assistant", "content": "The answer is ("}]),
        VLLM,
        {
            "messages": [
                {"role": "user", "content": "Hi"},
                {"role": "assistant", "content": "The answer is ("},
            ],
            "continue_final_message": True,
            "add_generation_prompt": False,
        },
    ),
]


@pytest.mark.parametrize(("rule", "body", "target", "expected"), MAPPINGS, ids=[m[0] for m in MAPPINGS])
def test_each_field_maps(
    rule: str, body: dict[str, Any], target: ChatTarget, expected: dict[str, Any]
) -> None:
    assert_anthropic_params(body)  # the input is what the anthropic SDK sends
    out = translate(body, target)
    for key, value in expected.items():
        assert out.get(key) == value, key


# (rule, Anthropic params, target, the param the refusal names, words of its message)
REFUSALS: list[tuple[str, dict[str, Any], ChatTarget, str, str]] = [
    ("max_tokens required", {"model": "c", "messages": [USER]}, OPENAI, "max_tokens", "required"),
    ("max_tokens 0 (cache pre-warming)", params(max_tokens=0), OPENAI, "max_tokens", "pre-warming"),
    ("max_tokens not a number", params(max_tokens="many"), OPENAI, "max_tokens", "whole number"),
    ("top_k without vLLM's extensions", params(top_k=5), OPENAI, "top_k", "top-k"),
    (
        "thinking enabled",
        params(thinking={"type": "enabled", "budget_tokens": 2048}),
        OPENAI,
        "thinking",
        "effort",
    ),
    ("thinking adaptive", params(thinking={"type": "adaptive"}), OPENAI, "thinking", "extended thinking"),
    ("stream true", params(stream=True), OPENAI, "stream", "cannot stream"),
    ("speed fast", params(speed="fast"), OPENAI, "speed", "no equivalent"),
    ("container", params(container="cntr_1"), OPENAI, "container", "no equivalent"),
    ("inference_geo", params(inference_geo="eu"), OPENAI, "inference_geo", "no equivalent"),
    (
        "mcp_servers",
        params(mcp_servers=[{"type": "url", "url": "https://x", "name": "x"}]),
        OPENAI,
        "mcp_servers",
        "",
    ),
    ("any unknown field", params(frobnicate=1), OPENAI, "frobnicate", "no equivalent"),
    (
        "metadata beyond user_id",
        params(metadata={"user_id": "u", "team": "t"}),
        OPENAI,
        "metadata.team",
        "user_id",
    ),
    (
        "a server tool",
        params(tools=[{"type": "web_search_20250305", "name": "web_search"}]),
        OPENAI,
        "tools[0].type",
        "server tool",
    ),
    ("a tool without input_schema", params(tools=[{"name": "f"}]), OPENAI, "tools[0]", "input_schema"),
    (
        "tool input_examples",
        params(tools=[{**TOOL, "input_examples": [{"city": "Oslo"}]}]),
        OPENAI,
        "tools[0].input_examples",
        "",
    ),
    (
        "an unknown tool_choice",
        params(tool_choice={"type": "sometimes"}),
        OPENAI,
        "tool_choice.type",
        "auto, any",
    ),
    (
        "a tool choice without a name",
        params(tool_choice={"type": "tool"}),
        OPENAI,
        "tool_choice.type",
        "name",
    ),
    (
        "output_config text format",
        params(output_config={"format": {"type": "regex"}}),
        OPENAI,
        "output_config.format",
        "",
    ),
    (
        "output_config unknown key",
        params(output_config={"task_budget": 5}),
        OPENAI,
        "output_config.task_budget",
        "",
    ),
    ("messages empty", params(messages=[]), OPENAI, "messages", "non-empty"),
    (
        "an unknown role",
        params(messages=[{"role": "tool", "content": "x"}]),
        OPENAI,
        "messages[0].role",
        "user",
    ),
    (
        "an empty content list",
        params(messages=[{"role": "user", "content": []}]),
        OPENAI,
        "messages[0].content",
        "non-empty",
    ),
    (
        "a prefill without vLLM's extensions",
        params(messages=[USER, {"role": "assistant", "content": "Sure: "}]),
        OPENAI,
        "messages[1]",
        "prefill",
    ),
    (
        "an image from the Files API",
        params(
            messages=[
                {"role": "user", "content": [{"type": "image", "source": {"type": "file", "file_id": "f"}}]}
            ]
        ),
        OPENAI,
        "messages[0].content[0].source",
        "base64 and URL",
    ),
    (
        "an image of an unknown media type",
        params(
            messages=[
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": "image/bmp", "data": "x"},
                        }
                    ],
                }
            ]
        ),
        OPENAI,
        "messages[0].content[0].source",
        "media_type",
    ),
    (
        "an image whose media type is not a string",
        params(
            messages=[
                {
                    "role": "user",
                    "content": [
                        {"type": "image", "source": {"type": "base64", "media_type": {}, "data": "x"}}
                    ],
                }
            ]
        ),
        OPENAI,
        "messages[0].content[0].source",
        "media_type",
    ),
    (
        "a plain-text document",
        params(
            messages=[
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "document",
                            "source": {"type": "text", "media_type": "text/plain", "data": "x"},
                        }
                    ],
                }
            ]
        ),
        OPENAI,
        "messages[0].content[0].source",
        "PDF",
    ),
    (
        "a document with citations enabled",
        params(
            messages=[
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "document",
                            "citations": {"enabled": True},
                            "source": {"type": "base64", "media_type": "application/pdf", "data": "x"},
                        }
                    ],
                }
            ]
        ),
        OPENAI,
        "messages[0].content[0].citations",
        "citations",
    ),
    (
        "a tool result flagged as an error",
        params(
            messages=[
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "is_error": True}]}
            ]
        ),
        OPENAI,
        "messages[0].content[0].is_error",
        "error flag",
    ),
    (
        "a tool result holding an image",
        params(
            messages=[
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "t",
                            "content": [
                                {"type": "image", "source": {"type": "url", "url": "https://x/y.png"}}
                            ],
                        }
                    ],
                }
            ]
        ),
        OPENAI,
        "messages[0].content[0].content[0]",
        "text only",
    ),
    (
        "a search_result block",
        params(
            messages=[
                {
                    "role": "user",
                    "content": [{"type": "search_result", "source": "s", "title": "t", "content": []}],
                }
            ]
        ),
        OPENAI,
        "messages[0].content[0]",
        "search_result",
    ),
    (
        "a server tool call in history",
        params(
            messages=[
                USER,
                {
                    "role": "assistant",
                    "content": [{"type": "server_tool_use", "id": "s", "name": "web_search", "input": {}}],
                },
                USER,
            ]
        ),
        OPENAI,
        "messages[1].content[0]",
        "server_tool_use",
    ),
    (
        "a tool_use whose input is not an object",
        params(
            messages=[
                USER,
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "t", "name": "f", "input": "x"}],
                },
                USER,
            ]
        ),
        OPENAI,
        "messages[1].content[0]",
        "object 'input'",
    ),
    (
        "a system block that is not text",
        params(system=[{"type": "image", "source": {"type": "url", "url": "https://x/y.png"}}]),
        OPENAI,
        "system[0]",
        "text",
    ),
]


@pytest.mark.parametrize(("rule", "body", "target", "param", "words"), REFUSALS, ids=[r[0] for r in REFUSALS])
def test_what_has_no_equivalent_is_refused_naming_the_field(
    rule: str, body: dict[str, Any], target: ChatTarget, param: str, words: str
) -> None:
    with pytest.raises(Untranslatable) as caught:
        to_chat_request(body, model="m", target=target)
    assert caught.value.param == param
    assert f"'{param}'" in caught.value.message and words in caught.value.message


def test_the_input_is_not_changed() -> None:
    body = params(
        system=[{"type": "text", "text": "A", "cache_control": {"type": "ephemeral"}}], tools=[TOOL]
    )
    before = repr(body)
    translate(body)
    assert repr(body) == before
