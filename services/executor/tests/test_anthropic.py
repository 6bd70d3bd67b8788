"""Chat Completions ↔ Anthropic Messages translation, both ways (wire-contracts.md §6)."""

from __future__ import annotations

import orjson
import pytest

from batchgate.services.executor.anthropic import to_chat_completion, to_messages_request, to_openai_error
from batchgate.services.executor.upstream import UnsupportedRequest

TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


def translate(body: dict, default_max_tokens: int = 4096) -> dict:
    return to_messages_request(body, "claude-upstream", default_max_tokens)


def test_system_and_developer_messages_become_the_system_prompt_and_turns_merge() -> None:
    out = translate(
        {
            "model": "claude",
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Hi"},
                {"role": "user", "content": [{"type": "text", "text": "there"}]},
                {"role": "developer", "content": [{"type": "text", "text": "Answer in French."}]},
                {"role": "assistant", "content": "Bonjour"},
                {"role": "user", "content": "Again"},
            ],
        }
    )
    assert out["model"] == "claude-upstream"
    assert out["system"] == "Be brief.\n\nAnswer in French."
    assert out["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Hi"}, {"type": "text", "text": "there"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Bonjour"}]},
        {"role": "user", "content": [{"type": "text", "text": "Again"}]},
    ]


def test_sampling_parameters_map_and_unknown_keys_pass_through() -> None:
    out = translate(
        {
            "model": "claude",
            "messages": [{"role": "user", "content": "x"}],
            "max_completion_tokens": 50,
            "max_tokens": 999,
            "temperature": 1.7,
            "top_p": 0.9,
            "stop": "END",
            "user": "user-42",
            "seed": 7,
            "frequency_penalty": 0.5,
            "stream": False,
            "top_k": 5,
        }
    )
    assert out["max_tokens"] == 50  # max_completion_tokens wins
    assert out["temperature"] == 1.0  # clamped to Anthropic's range
    assert out["top_p"] == 0.9
    assert out["stop_sequences"] == ["END"]
    assert out["metadata"] == {"user_id": "user-42"}
    assert out["top_k"] == 5  # Anthropic-only parameter rides along
    for dropped in ("seed", "frequency_penalty", "stream", "stop", "user", "max_completion_tokens"):
        assert dropped not in out


def test_max_tokens_defaults_when_absent() -> None:
    out = translate({"model": "c", "messages": [{"role": "user", "content": "x"}], "stop": ["a", "b"]}, 123)
    assert out["max_tokens"] == 123
    assert out["stop_sequences"] == ["a", "b"]


def test_tools_tool_choice_and_a_whole_tool_round_trip() -> None:
    out = translate(
        {
            "model": "c",
            "tools": [TOOL],
            "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
            "parallel_tool_calls": False,
            "messages": [
                {"role": "user", "content": "Weather in Paris and Rome?"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                        },
                        {
                            "id": "call_2",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'},
                        },
                    ],
                },
                {"role": "tool", "tool_call_id": "call_1", "content": "Sunny"},
                {"role": "tool", "tool_call_id": "call_2", "content": [{"type": "text", "text": "Rain"}]},
                {"role": "user", "content": "Thanks, summarise."},
            ],
        }
    )
    assert out["tools"] == [
        {
            "name": "get_weather",
            "description": "Weather for a city",
            "input_schema": TOOL["function"]["parameters"],
        }
    ]
    assert out["tool_choice"] == {"type": "tool", "name": "get_weather", "disable_parallel_tool_use": True}
    assistant, results = out["messages"][1], out["messages"][2]
    assert assistant == {
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"city": "Paris"}},
            {"type": "tool_use", "id": "call_2", "name": "get_weather", "input": {"city": "Rome"}},
        ],
    }
    # Tool results and the user's next words form one user turn, results first.
    assert results == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "call_1", "content": "Sunny"},
            {"type": "tool_result", "tool_use_id": "call_2", "content": [{"type": "text", "text": "Rain"}]},
            {"type": "text", "text": "Thanks, summarise."},
        ],
    }


@pytest.mark.parametrize(
    "choice, expected",
    [("auto", {"type": "auto"}), ("required", {"type": "any"}), ("none", {"type": "none"})],
)
def test_tool_choice_words(choice: str, expected: dict) -> None:
    out = translate(
        {"model": "c", "tools": [TOOL], "tool_choice": choice, "messages": [{"role": "user", "content": "x"}]}
    )
    assert out["tool_choice"] == expected


def test_images_and_pdfs_become_content_blocks() -> None:
    out = translate(
        {
            "model": "c",
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "What is this?", "cache_control": {"type": "ephemeral"}},
                        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
                        {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}},
                        {"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBERi0x"}},
                    ],
                }
            ],
        }
    )
    assert out["messages"][0]["content"] == [
        {"type": "text", "text": "What is this?", "cache_control": {"type": "ephemeral"}},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}},
        {
            "type": "document",
            "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0x"},
        },
    ]


@pytest.mark.parametrize(
    "extra, param",
    [
        ({"n": 2}, "n"),
        ({"logprobs": True}, "logprobs"),
        ({"response_format": {"type": "json_object"}}, "response_format"),
        ({"modalities": ["text", "audio"]}, "modalities"),
        ({"functions": [{"name": "f"}]}, "functions"),
        ({"messages": [{"role": "function", "content": "x"}]}, "messages[0]"),
        ({"messages": [{"role": "user", "content": [{"type": "input_audio"}]}]}, "messages[0]"),
        (
            {
                "messages": [
                    {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "[1]"}}]}
                ]
            },
            "messages[0]",
        ),
    ],
)
def test_what_has_no_equivalent_is_refused_naming_the_parameter(extra: dict, param: str) -> None:
    body = {"model": "c", "messages": [{"role": "user", "content": "x"}], **extra}
    with pytest.raises(UnsupportedRequest) as caught:
        translate(body)
    assert caught.value.param == param


def test_answer_with_text_and_tool_use_becomes_a_chat_completion() -> None:
    completion = to_chat_completion(
        {
            "id": "msg_1",
            "type": "message",
            "model": "claude-upstream",
            "content": [
                {"type": "thinking", "thinking": "hmm"},
                {"type": "text", "text": "Let me check. "},
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
            ],
            "stop_reason": "tool_use",
            "usage": {
                "input_tokens": 10,
                "output_tokens": 7,
                "cache_creation_input_tokens": 3,
                "cache_read_input_tokens": 20,
            },
        }
    )
    assert completion["object"] == "chat.completion" and completion["model"] == "claude-upstream"
    choice = completion["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] == "Let me check. "
    assert choice["message"]["tool_calls"] == [
        {
            "id": "toolu_1",
            "type": "function",
            "function": {"name": "get_weather", "arguments": orjson.dumps({"city": "Paris"}).decode()},
        }
    ]
    assert completion["usage"] == {
        "prompt_tokens": 33,
        "completion_tokens": 7,
        "total_tokens": 40,
        "prompt_tokens_details": {"cached_tokens": 20},
        "completion_tokens_details": {"reasoning_tokens": 0},
    }


@pytest.mark.parametrize(
    "stop_reason, finish",
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("max_tokens", "length"),
        ("refusal", "content_filter"),
    ],
)
def test_stop_reasons(stop_reason: str, finish: str) -> None:
    completion = to_chat_completion({"content": [{"type": "text", "text": "x"}], "stop_reason": stop_reason})
    assert completion["choices"][0]["finish_reason"] == finish
    assert "tool_calls" not in completion["choices"][0]["message"]


def test_anthropic_errors_take_openais_envelope() -> None:
    body = to_openai_error(
        429, {"type": "error", "error": {"type": "rate_limit_error", "message": "Slow down"}}
    )
    assert body == {
        "error": {
            "message": "Slow down",
            "type": "rate_limit_error",
            "param": None,
            "code": "rate_limit_error",
        }
    }
    assert (
        to_openai_error(529, {"type": "error", "error": {"type": "overloaded_error", "message": "Busy"}})[
            "error"
        ]["type"]
        == "server_error"
    )
    assert "Upstream answered HTTP 500" in to_openai_error(500, ["odd"])["error"]["message"]
