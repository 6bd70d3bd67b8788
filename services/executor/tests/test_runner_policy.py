"""Retry policy pieces: backoff bounds, Retry-After and spent-window parsing, usage extraction."""

from __future__ import annotations

import email.utils
import time
from datetime import UTC, datetime

import httpx
import pytest

from batchgate.services.common.catalogue import RetryPolicy
from batchgate.services.common.token_usage import usage_of
from batchgate.services.executor.rate_signals import retry_after_s, spent_window_s
from batchgate.services.executor.runner import backoff_s


def test_backoff_grows_exponentially_with_jitter_and_is_capped() -> None:
    policy = RetryPolicy(initial_interval_s=1.0, backoff_coefficient=2.0, max_interval_s=5.0)
    for retry, ceiling in [(0, 1.0), (1, 2.0), (2, 4.0), (5, 5.0)]:
        waits = [backoff_s(policy, retry, None) for _ in range(50)]
        assert all(ceiling / 2 <= w <= ceiling for w in waits)


def test_retry_after_wins_over_backoff() -> None:
    assert backoff_s(RetryPolicy(), 0, 7.0) == 7.0


def test_retry_after_header_forms() -> None:
    assert retry_after_s(httpx.Headers({"retry-after": "3"})) == 3.0
    assert retry_after_s(httpx.Headers({"retry-after-ms": "250"})) == 0.25
    date = email.utils.formatdate(time.time() + 10, usegmt=True)
    assert 8 <= retry_after_s(httpx.Headers({"retry-after": date})) <= 11
    assert retry_after_s(httpx.Headers({})) is None


@pytest.mark.parametrize(
    "headers",
    [
        {"retry-after": "soon"},
        {"retry-after": "nan"},
        {"retry-after": "inf"},
        {"retry-after": ""},
        {"retry-after": "Mon, 99 Foo 2026 99:99:99 GMT"},
        {"retry-after-ms": "nan"},
        {"retry-after-ms": "later"},
    ],
)
def test_an_unreadable_retry_after_asks_for_no_wait(headers: dict[str, str]) -> None:
    """`Retry-After: soon` raised out of the call: a 200 carrying it ended `internal_error`."""
    assert retry_after_s(httpx.Headers(headers)) is None


def test_an_unreadable_retry_after_ms_falls_back_to_retry_after() -> None:
    assert retry_after_s(httpx.Headers({"retry-after-ms": "nan", "retry-after": "2"})) == 2.0
    assert (
        spent_window_s(
            httpx.Headers({"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "nan"}), 5
        )
        == 5
    )


def test_a_spent_window_is_read_from_openai_and_anthropic_headers() -> None:
    assert spent_window_s(httpx.Headers({"x-ratelimit-remaining-requests": "3"}), 5) is None
    assert spent_window_s(httpx.Headers({}), 5) is None
    openai = {
        "x-ratelimit-remaining-requests": "0",
        "x-ratelimit-reset-requests": "1m30.5s",
        "x-ratelimit-remaining-tokens": "0",
        "x-ratelimit-reset-tokens": "20ms",
    }
    assert spent_window_s(httpx.Headers(openai), 5) == 90.5  # the longer of the two
    assert spent_window_s(httpx.Headers({"x-ratelimit-remaining-tokens": "0"}), 5) == 5  # no reset: default
    reset = datetime.fromtimestamp(time.time() + 12, UTC).isoformat().replace("+00:00", "Z")
    anthropic = {"anthropic-ratelimit-requests-remaining": "0", "anthropic-ratelimit-requests-reset": reset}
    assert 10 <= spent_window_s(httpx.Headers(anthropic), 5) <= 12  # type: ignore[operator]


def test_usage_from_chat_and_responses_shapes() -> None:
    chat = usage_of(
        {
            "usage": {
                "prompt_tokens": 10,
                "completion_tokens": 5,
                "prompt_tokens_details": {"cached_tokens": 4},
                "completion_tokens_details": {"reasoning_tokens": 2},
            }
        }
    )
    assert (chat.prompt_tokens, chat.completion_tokens, chat.cached_tokens, chat.reasoning_tokens) == (
        10,
        5,
        4,
        2,
    )
    responses = usage_of(
        {"usage": {"input_tokens": 7, "output_tokens": 3, "input_tokens_details": {"cached_tokens": 1}}}
    )
    assert (responses.prompt_tokens, responses.completion_tokens, responses.cached_tokens) == (7, 3, 1)
    assert usage_of({"no": "usage"}).prompt_tokens == 0
