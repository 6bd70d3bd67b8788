"""Error answers both ways: each upstream error shape, each status, in the other shape's object."""

from __future__ import annotations

from typing import Any

import pytest
from anthropic.types.shared.error_response import ErrorResponse

from batchgate.services.common.tests.sdk_shapes import assert_anthropic_error
from batchgate.services.common.translate.errors import (
    ANTHROPIC_ERROR_TYPES,
    anthropic_error_type,
    to_anthropic_error,
    to_openai_error,
)

# Types Anthropic answers with over HTTP that its SDK's ErrorResponse union does not list.
UNTYPED = frozenset({"request_too_large", "conflict_error"})


@pytest.mark.parametrize(
    ("status", "error_type"),
    [
        (400, "invalid_request_error"),
        (401, "authentication_error"),
        (402, "billing_error"),
        (403, "permission_error"),
        (404, "not_found_error"),
        (408, "timeout_error"),
        (409, "conflict_error"),
        (413, "request_too_large"),
        (422, "invalid_request_error"),
        (429, "rate_limit_error"),
        (500, "api_error"),
        (502, "api_error"),
        (503, "overloaded_error"),
        (504, "timeout_error"),
        (529, "overloaded_error"),
    ],
)
def test_each_status_takes_anthropics_error_type(status: int, error_type: str) -> None:
    body = to_anthropic_error(
        status, {"error": {"message": "Nope", "type": "x", "param": None, "code": None}}
    )
    assert body == {"type": "error", "error": {"type": error_type, "message": "Nope"}}
    if error_type not in UNTYPED:
        assert_anthropic_error(body)
    else:
        assert ErrorResponse.model_construct(**body).type == "error"


def test_the_status_table_covers_anthropics_documented_statuses() -> None:
    assert {400, 401, 402, 403, 404, 409, 413, 429, 500, 529} <= set(ANTHROPIC_ERROR_TYPES)
    assert anthropic_error_type(418) == "invalid_request_error" and anthropic_error_type(599) == "api_error"


# (rule, upstream body, Anthropic error message)
SHAPES: list[tuple[str, Any, str]] = [
    (
        "OpenAI's envelope",
        {"error": {"message": "Bad value", "type": "invalid_request_error", "param": "x", "code": None}},
        "Bad value",
    ),
    ("a bare error string (Ollama, llama.cpp)", {"error": "model 'x' not found"}, "model 'x' not found"),
    (
        "vLLM's flat error",
        {"object": "error", "message": "max_tokens too large", "type": "BadRequestError", "code": 400},
        "max_tokens too large",
    ),
    ("anything else is quoted", ["odd"], 'Upstream answered HTTP 400: ["odd"]'),
]


@pytest.mark.parametrize(("rule", "upstream", "text"), SHAPES, ids=[s[0] for s in SHAPES])
def test_openai_compatible_errors_become_anthropics(rule: str, upstream: Any, text: str) -> None:
    body = to_anthropic_error(400, upstream)
    assert body == {"type": "error", "error": {"type": "invalid_request_error", "message": text}}
    assert_anthropic_error(body)


def test_an_error_already_in_anthropics_shape_keeps_its_type_and_request_id_is_added() -> None:
    native = {"type": "error", "error": {"type": "overloaded_error", "message": "Busy"}}
    body = to_anthropic_error(529, native, request_id="req_1")
    assert body == {**native, "request_id": "req_1"}
    assert assert_anthropic_error(body).request_id == "req_1"


def test_a_long_upstream_message_is_cut() -> None:
    body = to_anthropic_error(500, {"error": {"message": "x" * 5000}})
    assert len(body["error"]["message"].encode()) <= 1024 and body["error"]["message"].endswith("...")


# Anthropic → OpenAI (what the executor does today for an Anthropic upstream's errors)
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
    overloaded = to_openai_error(
        529, {"type": "error", "error": {"type": "overloaded_error", "message": "Busy"}}
    )
    assert overloaded["error"]["type"] == "server_error" and overloaded["error"]["code"] == "overloaded_error"


def test_an_answer_already_in_openais_shape_passes_and_anything_else_is_quoted() -> None:
    openai_shaped = {
        "error": {"message": "m", "type": "server_error", "param": None, "code": "upstream_error"}
    }
    assert to_openai_error(502, openai_shaped) == openai_shaped
    quoted = to_openai_error(500, ["odd"])["error"]
    assert quoted["message"] == 'Upstream answered HTTP 500: ["odd"]' and quoted["code"] == "upstream_error"
