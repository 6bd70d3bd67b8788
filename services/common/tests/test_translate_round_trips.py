"""Round trips through both translators: what both shapes can say survives there and back, and
no input makes a translator fail with anything but `Untranslatable`."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from batchgate.services.common.tests.sdk_shapes import (
    assert_anthropic_message,
    assert_anthropic_params,
    assert_chat_completion,
    assert_openai_params,
)
from batchgate.services.common.translate.anthropic_to_chat import ChatTarget, to_chat_request
from batchgate.services.common.translate.chat_to_anthropic import to_anthropic_request
from batchgate.services.common.translate.responses import to_anthropic_message, to_chat_completion
from batchgate.services.common.translate.shared import Untranslatable

VLLM = ChatTarget(vllm_extensions=True)
TEXT = st.text(min_size=1, max_size=12)
NAME = st.from_regex(r"[a-z][a-z0-9_]{0,10}", fullmatch=True)
IDENT = st.from_regex(r"toolu_[A-Za-z0-9]{1,8}", fullmatch=True)
SCALAR = st.none() | st.booleans() | st.integers(-1000, 1000) | TEXT
ARGUMENTS = st.dictionaries(NAME, SCALAR, max_size=3)
COUNT = st.integers(0, 10_000)

text_block = st.builds(lambda t: {"type": "text", "text": t}, TEXT)
image_block = st.one_of(
    st.builds(
        lambda t, d: {"type": "image", "source": {"type": "base64", "media_type": t, "data": d}},
        st.sampled_from(["image/png", "image/jpeg", "image/gif", "image/webp"]),
        st.from_regex(r"[A-Za-z0-9+/]{4,16}", fullmatch=True),
    ),
    st.builds(
        lambda n: {"type": "image", "source": {"type": "url", "url": f"https://example.com/{n}.png"}}, NAME
    ),
)
pdf_block = st.builds(
    lambda d: {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": d}},
    st.from_regex(r"[A-Za-z0-9+/]{4,16}", fullmatch=True),
)
tool_use = st.builds(
    lambda i, n, a: {"type": "tool_use", "id": i, "name": n, "input": a}, IDENT, NAME, ARGUMENTS
)
tool_result = st.builds(
    lambda i, c: {"type": "tool_result", "tool_use_id": i, "content": c},
    IDENT,
    TEXT | st.lists(text_block, min_size=1, max_size=2),
)
# A user turn: its tool results first (as Anthropic requires), then text, images, PDFs.
user_turn = st.builds(
    lambda results, parts: {"role": "user", "content": results + parts},
    st.lists(tool_result, max_size=2),
    st.lists(text_block | image_block | pdf_block, min_size=1, max_size=3),
) | st.builds(lambda t: {"role": "user", "content": t}, TEXT)
assistant_turn = st.builds(
    lambda texts, calls: {"role": "assistant", "content": texts + calls},
    st.lists(text_block, max_size=2),
    st.lists(tool_use, max_size=2),
).filter(lambda turn: turn["content"]) | st.builds(lambda t: {"role": "assistant", "content": t}, TEXT)
tool = st.builds(
    lambda n, d: {
        "name": n,
        "input_schema": {"type": "object", "properties": {}},
        **({"description": d} if d else {}),
    },
    NAME,
    st.none() | TEXT,
)
tool_choice = st.one_of(
    st.sampled_from([{"type": "auto"}, {"type": "any"}, {"type": "none"}]),
    st.sampled_from(
        [
            {"type": "auto", "disable_parallel_tool_use": True},
            {"type": "any", "disable_parallel_tool_use": True},
        ]
    ),
    st.builds(lambda n: {"type": "tool", "name": n}, NAME),
)


@st.composite
def anthropic_params(draw: st.DrawFn) -> dict[str, Any]:
    turns = draw(st.lists(st.tuples(user_turn, assistant_turn), min_size=0, max_size=2))
    messages = [turn for pair in turns for turn in pair] + [draw(user_turn)]
    params: dict[str, Any] = {"model": "m", "max_tokens": draw(st.integers(1, 8192)), "messages": messages}
    optional = {
        "system": TEXT | st.lists(text_block, min_size=1, max_size=2),
        "temperature": st.floats(0, 1),
        "top_p": st.floats(0, 1),
        "top_k": st.integers(1, 100),
        "stop_sequences": st.lists(TEXT, min_size=1, max_size=3),
        "metadata": st.builds(lambda u: {"user_id": u}, TEXT),
    }
    for key, strategy in optional.items():
        if draw(st.booleans()):
            params[key] = draw(strategy)
    if draw(st.booleans()):
        params["tools"] = draw(st.lists(tool, min_size=1, max_size=2))
        if draw(st.booleans()):
            params["tool_choice"] = draw(tool_choice)
    return params


def _blocks(content: Any) -> list[Any]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


def normal_params(params: dict[str, Any]) -> dict[str, Any]:
    """`params` as the Anthropic translator writes them: string contents as one text block,
    consecutive same-role turns merged, a system of blocks joined."""
    out = dict(params)
    merged: list[dict[str, Any]] = []
    for turn in params["messages"]:
        if merged and merged[-1]["role"] == turn["role"]:
            merged[-1]["content"] += _blocks(turn["content"])
        else:
            merged.append({"role": turn["role"], "content": list(_blocks(turn["content"]))})
    out["messages"] = merged
    if isinstance(params.get("system"), list):
        out["system"] = "\n\n".join(block["text"] for block in params["system"])
    if "metadata" in params:
        out["metadata"] = dict(params["metadata"])
    return out


@settings(max_examples=300, deadline=None)
@given(anthropic_params())
def test_an_anthropic_request_survives_openai_and_back(params: dict[str, Any]) -> None:
    assert_anthropic_params(params)
    chat = to_chat_request(params, model="m", target=VLLM)
    assert_openai_params(chat)
    back = to_anthropic_request(chat, model="m", default_max_tokens=1)
    assert_anthropic_params(back)
    assert back == normal_params(params)


STOP_REASONS = ["end_turn", "max_tokens", "tool_use", "refusal"]
# What OpenAI's finish reasons cannot tell apart comes back as its nearest reason.
LOSSY_STOPS = {
    "stop_sequence": "end_turn",
    "pause_turn": "end_turn",
    "model_context_window_exceeded": "max_tokens",
}


@st.composite
def anthropic_messages(draw: st.DrawFn) -> dict[str, Any]:
    texts = draw(st.lists(text_block, max_size=2))
    calls = draw(st.lists(tool_use, max_size=2))
    return {
        "id": draw(st.from_regex(r"msg_[A-Za-z0-9]{4,12}", fullmatch=True)),
        "type": "message",
        "role": "assistant",
        "model": "claude-x",
        "content": texts + calls,
        "stop_reason": draw(st.sampled_from([*STOP_REASONS, *LOSSY_STOPS])),
        "stop_sequence": None,
        "usage": {
            "input_tokens": draw(COUNT),
            "output_tokens": draw(COUNT),
            "cache_creation_input_tokens": draw(COUNT),
            "cache_read_input_tokens": draw(COUNT),
        },
    }


@settings(max_examples=300, deadline=None)
@given(anthropic_messages())
def test_an_anthropic_message_survives_a_chat_completion_and_back(message: dict[str, Any]) -> None:
    assert_anthropic_message(message)
    completion = to_chat_completion(message, created=0)
    assert_chat_completion(completion)
    back = to_anthropic_message(completion)
    assert_anthropic_message(back)
    text = "".join(b["text"] for b in message["content"] if b["type"] == "text")
    calls = [b for b in message["content"] if b["type"] == "tool_use"]
    expected_stop = LOSSY_STOPS.get(message["stop_reason"], message["stop_reason"])
    if calls and expected_stop == "end_turn":
        expected_stop = "tool_use"  # tool calls that end a turn are a tool_use stop
    assert back == {
        **message,
        "content": ([{"type": "text", "text": text}] if text else []) + calls,
        "stop_reason": expected_stop,
    }


@st.composite
def chat_completions(draw: st.DrawFn) -> dict[str, Any]:
    calls = [
        {
            "id": ident,
            "type": "function",
            "function": {"name": name, "arguments": orjson.dumps(args).decode()},
        }
        for ident, name, args in draw(st.lists(st.tuples(IDENT, NAME, ARGUMENTS), max_size=2))
    ]
    reply: dict[str, Any] = {
        "role": "assistant",
        "content": draw(TEXT) if not calls or draw(st.booleans()) else None,
    }
    reply["refusal"] = None
    if calls:
        reply["tool_calls"] = calls
    finish = "tool_calls" if calls else draw(st.sampled_from(["stop", "length", "content_filter"]))
    cached, written, fresh, completion_tokens = draw(COUNT), draw(COUNT), draw(COUNT), draw(COUNT)
    prompt = cached + written + fresh
    return {
        "id": "chatcmpl-x",
        "object": "chat.completion",
        "created": 0,
        "model": "qwen",
        "choices": [{"index": 0, "message": reply, "logprobs": None, "finish_reason": finish}],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt + completion_tokens,
            "prompt_tokens_details": {"cached_tokens": cached, "cache_write_tokens": written},
            "completion_tokens_details": {"reasoning_tokens": 0},
        },
    }


@settings(max_examples=300, deadline=None)
@given(chat_completions())
def test_a_chat_completion_survives_a_message_and_back(completion: dict[str, Any]) -> None:
    assert_chat_completion(completion)
    message = to_anthropic_message(completion)
    assert_anthropic_message(message)
    back = to_chat_completion(message, created=0)
    assert_chat_completion(back)
    assert back == {**completion, "id": "msg_x"}


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=15,
)


def some_fields(*names: str) -> st.SearchStrategy[dict[str, Any]]:
    """Up to four of `names`, each holding any JSON."""
    return st.dictionaries(st.sampled_from(names), JSON, max_size=4)


SOURCE = JSON | st.fixed_dictionaries(
    {"type": st.sampled_from(["base64", "url", "file", "text"])},
    optional={
        "media_type": JSON | st.sampled_from(["image/png", "application/pdf"]),
        "data": JSON,
        "url": JSON,
    },
)
BLOCKISH = st.fixed_dictionaries(
    {"type": st.sampled_from(["text", "image", "document", "tool_use", "tool_result", "thinking", "x"])},
    optional={
        "text": JSON,
        "source": SOURCE,
        "id": JSON,
        "name": JSON,
        "input": JSON,
        "content": JSON,
        "is_error": JSON,
    },
)
TURN = st.fixed_dictionaries(
    {
        "role": st.sampled_from(["user", "assistant", "system", "tool"]),
        "content": JSON | st.lists(BLOCKISH, max_size=3),
    }
)


@settings(max_examples=300, deadline=None)
@given(
    messages=JSON | st.lists(TURN | JSON, max_size=3),
    fields=some_fields(
        "system", "tools", "tool_choice", "metadata", "output_config", "stop_sequences", "top_k", "thinking"
    ),
)
def test_an_anthropic_request_translates_or_is_refused_never_crashes(
    messages: Any, fields: dict[str, Any]
) -> None:
    params = {"model": "m", "max_tokens": 10, "messages": messages, **fields}
    for target in (ChatTarget(), VLLM):
        try:
            to_chat_request(params, model="m", target=target)
        except Untranslatable as exc:
            assert exc.message and exc.param is not None


@settings(max_examples=200, deadline=None)
@given(
    answer=st.dictionaries(
        st.sampled_from(["id", "choices", "usage", "model"]),
        JSON | st.lists(st.fixed_dictionaries({"message": JSON, "finish_reason": JSON})),
    )
)
def test_an_openai_answer_translates_or_is_refused_never_crashes(answer: dict[str, Any]) -> None:
    try:
        to_anthropic_message(answer)
    except Untranslatable as exc:
        assert exc.message


OPENAI_TURN = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "system", "developer", "tool", "function"])},
    optional={
        "content": JSON
        | st.lists(
            st.fixed_dictionaries({"type": JSON}, optional={"text": JSON, "image_url": JSON, "file": JSON})
        ),
        "tool_calls": JSON | st.lists(st.fixed_dictionaries({"id": JSON, "function": JSON})),
        "tool_call_id": JSON,
    },
)


@settings(max_examples=200, deadline=None)
@given(
    messages=JSON | st.lists(OPENAI_TURN | JSON, max_size=3),
    fields=some_fields(
        "n",
        "logprobs",
        "modalities",
        "audio",
        "response_format",
        "temperature",
        "stop",
        "user",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "max_tokens",
    ),
)
def test_an_openai_request_translates_or_is_refused_never_crashes(
    messages: Any, fields: dict[str, Any]
) -> None:
    try:
        to_anthropic_request({"model": "m", "messages": messages, **fields}, model="m", default_max_tokens=10)
    except Untranslatable as exc:
        assert exc.message and exc.param
