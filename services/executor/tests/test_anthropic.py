"""The upstream adapters on both item shapes: OpenAI chat completions and Message Batch items.

The translation rules themselves are tested one by one in services/common/tests
(test_translate_*.py); these check what each adapter sends and keeps for each shape.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from batchgate.services.common.api_shapes import CHAT_ENDPOINT, MESSAGES_ENDPOINT
from batchgate.services.common.catalogue import ProviderConfig
from batchgate.services.executor.anthropic import AnthropicMessages
from batchgate.services.executor.upstream import OpenAICompatible, UnsupportedRequest
from batchgate.services.executor.usage import usage_of

ANTHROPIC = AnthropicMessages(
    ProviderConfig(
        name="a", kind="anthropic", base_url="https://api.anthropic.test/v1", default_max_tokens=77
    )
)
OPENAI = OpenAICompatible(ProviderConfig(name="o", base_url="http://vllm.test/v1"))
PARAMS = {
    "model": "claude-haiku-4-5",
    "max_tokens": 64,
    "system": "Be brief.",
    "stop_sequences": ["END"],
    "messages": [{"role": "user", "content": "Hi"}],
}
MESSAGE = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-upstream",
    "content": [{"type": "text", "text": "Hello"}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {
        "input_tokens": 10,
        "output_tokens": 7,
        "cache_creation_input_tokens": 3,
        "cache_read_input_tokens": 20,
    },
}
COMPLETION = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "model": "served-model",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "Hello"}, "finish_reason": "length"}
    ],
    "usage": {"prompt_tokens": 12, "completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": 4}},
}


def _sent(request: Any) -> dict[str, Any]:
    parsed: dict[str, Any] = orjson.loads(request.content)
    return parsed


def test_a_message_batch_item_goes_to_anthropic_as_it_is_but_for_the_model_name() -> None:
    request = ANTHROPIC.build(MESSAGES_ENDPOINT, orjson.dumps(PARAMS), "claude-upstream", "claude-haiku-4-5")
    assert request.url == "https://api.anthropic.test/v1/messages"
    assert request.headers["anthropic-version"] == "2023-06-01"
    assert _sent(request) == {**PARAMS, "model": "claude-upstream"}
    answer = ANTHROPIC.answer(MESSAGES_ENDPOINT, 200, orjson.dumps(MESSAGE), "req_1")
    assert answer.parsed == MESSAGE and answer.request_id == "req_1"
    error = {"type": "error", "error": {"type": "overloaded_error", "message": "Busy"}}
    kept = ANTHROPIC.answer(MESSAGES_ENDPOINT, 529, orjson.dumps(error), "req_2")
    assert kept.status_code == 529 and kept.parsed == error


def test_a_chat_item_is_translated_for_anthropic_and_its_answer_back() -> None:
    body = {"model": "claude", "messages": [{"role": "user", "content": "Hi"}], "stop": "END"}
    sent = _sent(ANTHROPIC.build(CHAT_ENDPOINT, orjson.dumps(body), "claude-upstream", "claude"))
    assert sent == {
        "model": "claude-upstream",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
        "max_tokens": 77,
        "stop_sequences": ["END"],
    }
    answer = ANTHROPIC.answer(CHAT_ENDPOINT, 200, orjson.dumps(MESSAGE), "req_1")
    assert answer.parsed["object"] == "chat.completion"
    assert answer.parsed["choices"][0]["message"]["content"] == "Hello"
    error = ANTHROPIC.answer(
        CHAT_ENDPOINT, 429, b'{"type":"error","error":{"type":"rate_limit_error","message":"Slow"}}', "r"
    )
    assert error.parsed["error"]["message"] == "Slow" and error.parsed["error"]["code"] == "rate_limit_error"


def test_what_anthropic_cannot_express_is_unsupported_naming_the_parameter() -> None:
    body = {"model": "claude", "messages": [{"role": "user", "content": "Hi"}], "n": 2}
    with pytest.raises(UnsupportedRequest) as caught:
        ANTHROPIC.build(CHAT_ENDPOINT, orjson.dumps(body), "claude", "claude")
    assert caught.value.param == "n"
    with pytest.raises(UnsupportedRequest):
        ANTHROPIC.build("/v1/embeddings", b"{}", "claude", "claude")


def test_a_message_batch_item_is_translated_for_an_openai_compatible_upstream() -> None:
    request = OPENAI.build(MESSAGES_ENDPOINT, orjson.dumps(PARAMS), "served-model", "claude-haiku-4-5")
    assert request.url == "http://vllm.test/v1/chat/completions"
    assert _sent(request) == {
        "model": "served-model",
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
        "max_tokens": 64,
        "stop": ["END"],
    }
    answer = OPENAI.answer(MESSAGES_ENDPOINT, 200, orjson.dumps(COMPLETION), "req_1")
    message = answer.parsed
    assert message["type"] == "message" and message["content"] == [{"type": "text", "text": "Hello"}]
    assert message["stop_reason"] == "max_tokens"
    assert message["usage"]["input_tokens"] == 8 and message["usage"]["cache_read_input_tokens"] == 4
    failed = OPENAI.answer(MESSAGES_ENDPOINT, 400, b'{"error":{"message":"bad"}}', "req_2")
    assert failed.status_code == 400 and failed.parsed == {"error": {"message": "bad"}}


def test_an_answer_the_message_shape_cannot_hold_is_a_bad_gateway_answer() -> None:
    odd = OPENAI.answer(MESSAGES_ENDPOINT, 200, b'{"choices":[]}', "req_1")
    assert odd.status_code == 502
    assert odd.parsed["type"] == "error" and "cannot be translated" in odd.parsed["error"]["message"]


def test_a_translation_refusal_is_unsupported_naming_the_parameter() -> None:
    with pytest.raises(UnsupportedRequest) as caught:
        OPENAI.build(MESSAGES_ENDPOINT, orjson.dumps({**PARAMS, "thinking": {"type": "enabled"}}), "m", "m")
    assert caught.value.param == "thinking"


def test_a_messages_usage_counts_cache_reads_and_writes_in_the_prompt() -> None:
    usage = usage_of(MESSAGE)
    assert (usage.prompt_tokens, usage.completion_tokens, usage.cached_tokens) == (33, 7, 20)


def test_a_providers_chat_target_shapes_the_translated_request() -> None:
    provider = ProviderConfig(
        name="v", base_url="http://vllm.test/v1", max_tokens_field="max_completion_tokens"
    )
    reasoning = OpenAICompatible(provider)
    sent = _sent(reasoning.build(MESSAGES_ENDPOINT, orjson.dumps(PARAMS), "o3", "o3"))
    assert sent["max_completion_tokens"] == 64 and "max_tokens" not in sent
    vllm = OpenAICompatible(ProviderConfig(name="v", base_url="http://vllm.test/v1", vllm_extensions=True))
    assert _sent(vllm.build(MESSAGES_ENDPOINT, orjson.dumps({**PARAMS, "top_k": 5}), "m", "m"))["top_k"] == 5
    with pytest.raises(UnsupportedRequest) as caught:
        OPENAI.build(MESSAGES_ENDPOINT, orjson.dumps({**PARAMS, "top_k": 5}), "m", "m")
    assert caught.value.param == "top_k"
