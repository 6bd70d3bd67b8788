"""Message Batches create bodies, per Anthropic's rules: the body as a whole, then each request
alone with its index, custom_id, code and message."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from batchgate.services.common.translate.anthropic_to_chat import ChatTarget
from batchgate.services.common.translate.message_batches import (
    AcceptedRequest,
    BatchLimits,
    BatchRefused,
    ModelRoute,
    RejectedRequest,
    RequestChecker,
    check_create,
    echoed_custom_id,
    requests_of,
)

ROUTES = {
    "claude-native": ModelRoute(anthropic=True),
    "qwen-on-vllm": ModelRoute(chat_targets=(ChatTarget(vllm_extensions=True),)),
    "gpt-on-openai": ModelRoute(chat_targets=(ChatTarget(),)),
    "with-a-fallback": ModelRoute(chat_targets=(ChatTarget(), ChatTarget(vllm_extensions=True))),
    "unserved": ModelRoute(),
}


def params(**fields: Any) -> dict[str, Any]:
    return {
        "model": "claude-native",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": "Hi"}],
        **fields,
    }


def request(custom_id: Any = "req-1", **fields: Any) -> dict[str, Any]:
    return {"custom_id": custom_id, "params": params(**fields)}


def check(*requests: Any, limits: BatchLimits | None = None) -> list[AcceptedRequest | RejectedRequest]:
    return check_create({"requests": list(requests)}, body_bytes=1000, route=ROUTES.get, limits=limits)


def test_good_requests_are_accepted_in_order_with_their_params() -> None:
    first, second = check(request("a"), request("b", model="qwen-on-vllm", top_k=5))
    assert first == AcceptedRequest(index=0, custom_id="a", model="claude-native", params=params())
    assert isinstance(second, AcceptedRequest) and second.index == 1 and second.model == "qwen-on-vllm"


# (rule, body, body_bytes, limits, HTTP status, words of the message)
WHOLE_BODY: list[tuple[str, Any, int, BatchLimits, int, str]] = [
    (
        "over the size limit",
        {"requests": [request()]},
        300,
        BatchLimits(max_body_bytes=299),
        413,
        "300 bytes",
    ),
    ("not an object", [request()], 10, BatchLimits(), 400, "JSON object"),
    ("an unknown field", {"requests": [request()], "mode": "fast"}, 10, BatchLimits(), 400, "'mode'"),
    ("requests missing", {}, 10, BatchLimits(), 400, "'requests' must be a list"),
    ("requests not a list", {"requests": {"a": 1}}, 10, BatchLimits(), 400, "'requests' must be a list"),
    ("no requests", {"requests": []}, 10, BatchLimits(), 400, "at least one"),
    (
        "over the count limit",
        {"requests": [request("a"), request("b")]},
        10,
        BatchLimits(max_requests=1),
        400,
        "limit is 1",
    ),
]


@pytest.mark.parametrize(
    ("rule", "body", "size", "limits", "status", "words"), WHOLE_BODY, ids=[w[0] for w in WHOLE_BODY]
)
def test_a_body_that_cannot_be_a_batch_is_refused_whole(
    rule: str, body: Any, size: int, limits: BatchLimits, status: int, words: str
) -> None:
    with pytest.raises(BatchRefused) as caught:
        requests_of(body, body_bytes=size, limits=limits)
    assert caught.value.status == status and words in caught.value.message
    error_type = "request_too_large" if status == 413 else "invalid_request_error"
    assert caught.value.body() == {
        "type": "error",
        "error": {"type": error_type, "message": caught.value.message},
    }


def test_the_default_limits_are_anthropics() -> None:
    assert BatchLimits().max_requests == 100_000 and BatchLimits().max_body_bytes == 256 * 1024 * 1024


# (rule, request, code, param, echoed custom_id, words of the message)
PER_REQUEST: list[tuple[str, Any, str, str | None, str, str]] = [
    ("not an object", ["a"], "invalid_request", None, "", "object"),
    ("no custom_id", {"params": params()}, "missing_custom_id", "custom_id", "", "no 'custom_id'"),
    ("a null custom_id", request(None), "missing_custom_id", "custom_id", "", "no 'custom_id'"),
    ("an empty custom_id", request(""), "missing_custom_id", "custom_id", "", "'custom_id' is empty"),
    ("a custom_id that is not a string", request(7), "invalid_custom_id", "custom_id", "7", "string"),
    ("an object custom_id", request({"a": [1]}), "invalid_custom_id", "custom_id", '{"a":[1]}', "string"),
    ("a custom_id with a space", request("a b"), "invalid_custom_id", "custom_id", "a b", "letters, digits"),
    ("a custom_id of 65 chars", request("x" * 65), "invalid_custom_id", "custom_id", "x" * 65, "1 to 64"),
    ("an unknown field", {**request(), "method": "POST"}, "invalid_request", "method", "req-1", "'method'"),
    ("params not an object", {"custom_id": "a", "params": "x"}, "invalid_params", "params", "a", "object"),
    ("stream true", request(stream=True), "stream_not_supported", "params.stream", "req-1", "stream"),
    (
        "a workflow on a model served natively",
        request(batchgate={"workflow": {"url": "http://127.0.0.1:9/wf"}}),
        "unsupported_parameter",
        "params.batchgate",
        "req-1",
        "/v1/batches",
    ),
    (
        "a tool_config on a model served natively",
        request(batchgate={"tool_config": {"url": "http://127.0.0.1:9/t"}}),
        "unsupported_parameter",
        "params.batchgate",
        "req-1",
        "/v1/batches",
    ),
    (
        "no max_tokens",
        {"custom_id": "a", "params": {"model": "claude-native", "messages": [{}]}},
        "missing_max_tokens",
        "params.max_tokens",
        "a",
        "required",
    ),
    (
        "max_tokens not a number",
        request(max_tokens="64"),
        "invalid_max_tokens",
        "params.max_tokens",
        "req-1",
        "whole",
    ),
    (
        "max_tokens a boolean",
        request(max_tokens=True),
        "invalid_max_tokens",
        "params.max_tokens",
        "req-1",
        "whole",
    ),
    (
        "max_tokens negative",
        request(max_tokens=-1),
        "invalid_max_tokens",
        "params.max_tokens",
        "req-1",
        "'params.max_tokens' is -1; it must be at least 1",
    ),
    ("no model", request(model=None), "missing_model", "params.model", "req-1", "model"),
    ("no messages", request(messages=[]), "invalid_messages", "params.messages", "req-1", "non-empty"),
    ("a model not offered", request(model="gpt-9"), "model_not_found", "params.model", "req-1", "'gpt-9'"),
    (
        "a model no upstream serves",
        request(model="unserved"),
        "model_not_found",
        "params.model",
        "req-1",
        "No upstream",
    ),
    (
        "untranslatable for the OpenAI-compatible upstream",
        request(model="gpt-on-openai", top_k=5),
        "unsupported_parameter",
        "params.top_k",
        "req-1",
        "'params.top_k': this OpenAI-compatible upstream has no top-k sampling",
    ),
    (
        "thinking on an OpenAI-compatible upstream",
        request(model="qwen-on-vllm", thinking={"type": "enabled", "budget_tokens": 2000}),
        "unsupported_parameter",
        "params.thinking",
        "req-1",
        "extended thinking",
    ),
    (
        "a prefill where no upstream can continue it",
        request(
            model="gpt-on-openai",
            messages=[{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "So"}],
        ),
        "unsupported_parameter",
        "params.messages[1]",
        "req-1",
        "prefill",
    ),
]


@pytest.mark.parametrize(
    ("rule", "item", "code", "param", "custom_id", "words"), PER_REQUEST, ids=[p[0] for p in PER_REQUEST]
)
def test_each_bad_request_is_rejected_alone(
    rule: str, item: Any, code: str, param: str | None, custom_id: str, words: str
) -> None:
    good, rejected = check(request("ok"), item)
    assert isinstance(good, AcceptedRequest)
    assert isinstance(rejected, RejectedRequest)
    assert (rejected.index, rejected.code, rejected.param, rejected.custom_id) == (1, code, param, custom_id)
    assert words in rejected.message


def test_a_custom_id_is_unique_even_when_its_first_request_was_rejected() -> None:
    outcomes = check(request("a"), request("a"), request("b", stream=True), request("b"))
    codes = [o.code if isinstance(o, RejectedRequest) else "accepted" for o in outcomes]
    assert codes == ["accepted", "duplicate_custom_id", "stream_not_supported", "duplicate_custom_id"]
    assert "appears more than once" in outcomes[1].message  # type: ignore[union-attr]


def test_a_model_served_natively_takes_anthropic_only_fields() -> None:
    (outcome,) = check(request(top_k=5, thinking={"type": "enabled", "budget_tokens": 2048}))
    assert isinstance(outcome, AcceptedRequest)


def test_a_request_runs_when_one_of_its_upstreams_can_take_it() -> None:
    (outcome,) = check(request(model="with-a-fallback", top_k=5))
    assert isinstance(outcome, AcceptedRequest)


def test_a_params_size_limit_of_its_own() -> None:
    (outcome,) = check(request(system="x" * 500), limits=BatchLimits(max_request_bytes=400))
    assert isinstance(outcome, RejectedRequest) and outcome.code == "record_too_large"
    assert outcome.param == "params" and "limit is 400" in outcome.message


def test_the_router_is_asked_once_per_model() -> None:
    asked: list[str] = []

    def route(model: str) -> ModelRoute | None:
        asked.append(model)
        return ROUTES.get(model)

    checker = RequestChecker(route=route)
    for number in range(5):
        checker.check(number, request(f"r{number}", model="qwen-on-vllm"))
    assert asked == ["qwen-on-vllm"]


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
FIELDS = st.sampled_from(
    ["model", "max_tokens", "messages", "system", "tools", "tool_choice", "stream", "top_k"]
)


@settings(max_examples=300, deadline=None)
@given(
    custom_id=JSON | st.text(max_size=70),
    fields=st.dictionaries(FIELDS, JSON, max_size=6),
    model=st.sampled_from(sorted(ROUTES)),
)
def test_a_checker_never_raises_whatever_a_request_holds(
    custom_id: Any, fields: dict[str, Any], model: str
) -> None:
    outcome = RequestChecker(route=ROUTES.get).check(
        0, {"custom_id": custom_id, "params": {"model": model, **fields}}
    )
    assert isinstance(outcome, AcceptedRequest | RejectedRequest)
    assert isinstance(outcome.custom_id, str)  # a result always carries one


def test_a_custom_id_nested_past_what_python_walks_echoes_as_empty() -> None:
    """orjson reads 1,024 levels; writing such a custom_id back raised RecursionError: a 500."""
    deep: Any = []
    for _ in range(1000):
        deep = [deep]
    assert echoed_custom_id(deep) == ""
    assert echoed_custom_id([[1]]) == "[[1]]"
