"""The installed SDKs' own types as the judge of what the translators produce.

Request params are TypedDicts: pydantic validates them, but keeps `Iterable` fields as lazy
iterators (consumed here, which validates their items) and leaves out keys the type does not
have — so comparing the validated copy with the input also catches unknown or misspelt keys.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pydantic
from anthropic.types import Message
from anthropic.types.message_create_params import MessageCreateParamsNonStreaming
from anthropic.types.shared.error_response import ErrorResponse
from openai.types.chat import ChatCompletion
from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming

# Sampling parameters Anthropic's API takes that anthropic 2.14's types no longer list.
ANTHROPIC_UNTYPED = frozenset({"temperature", "top_p", "top_k"})
# vLLM's extensions to OpenAI's chat request.
VLLM_UNTYPED = frozenset({"top_k", "continue_final_message", "add_generation_prompt"})

_ANTHROPIC_PARAMS = pydantic.TypeAdapter(MessageCreateParamsNonStreaming)
_OPENAI_PARAMS = pydantic.TypeAdapter(CompletionCreateParamsNonStreaming)


def _plain(value: Any) -> Any:
    if isinstance(value, pydantic.BaseModel):
        return _plain(value.model_dump(exclude_unset=True))
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple | Iterator):
        return [_plain(item) for item in value]
    return value


def _typed(adapter: pydantic.TypeAdapter[Any], value: dict[str, Any], untyped: frozenset[str]) -> None:
    typed = {key: item for key, item in value.items() if key not in untyped}
    assert _plain(adapter.validate_python(typed)) == typed


def assert_anthropic_params(value: dict[str, Any]) -> None:
    """`value` is a Messages request exactly as the anthropic SDK types it."""
    _typed(_ANTHROPIC_PARAMS, value, ANTHROPIC_UNTYPED)


def assert_openai_params(value: dict[str, Any]) -> None:
    """`value` is a chat completion request exactly as the openai SDK types it."""
    _typed(_OPENAI_PARAMS, value, VLLM_UNTYPED)


def assert_anthropic_message(value: dict[str, Any]) -> Message:
    message = Message.model_validate(value, strict=False)
    assert _plain(message) == value
    return message


def assert_chat_completion(value: dict[str, Any]) -> ChatCompletion:
    """`value` is a chat.completion as the openai SDK types it (apart from the fields vLLM adds:
    a choice's `stop_reason`, a message's `reasoning_content`)."""
    completion = ChatCompletion.model_validate(value)
    plain = _plain(completion)
    for number, choice in enumerate(value["choices"]):
        if "stop_reason" in choice:
            plain["choices"][number]["stop_reason"] = choice["stop_reason"]
        if "reasoning_content" in choice["message"]:
            plain["choices"][number]["message"]["reasoning_content"] = choice["message"]["reasoning_content"]
    assert plain == value
    return completion


def assert_anthropic_error(value: dict[str, Any]) -> ErrorResponse:
    error = ErrorResponse.model_validate(value)
    assert _plain(error) == value
    return error
