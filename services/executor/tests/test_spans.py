"""What the executor's spans may record: no credentials in URLs, content only when opted in."""

from __future__ import annotations

import orjson
import pytest

from batchgate.services.executor.spans import _request_attributes, safe_url


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (
            "https://user:sk-secret@api.example.com/v1/chat/completions",
            "https://api.example.com/v1/chat/completions",
        ),
        (
            "https://api.example.com:8443/v1/embeddings?key=sk-secret#x",
            "https://api.example.com:8443/v1/embeddings",
        ),
        ("http://[::1]:8099/v1/messages", "http://[::1]:8099/v1/messages"),
    ],
)
def test_urls_lose_user_info_query_and_fragment(url: str, shown: str) -> None:
    assert safe_url(url) == shown


def test_prompts_are_recorded_only_when_opted_in() -> None:
    body = orjson.dumps(
        {
            "model": "m",
            "messages": [{"role": "user", "content": "secret plan"}],
            "max_tokens": 7,
            "temperature": 0.2,
        }
    )
    plain = _request_attributes(body, record_content=False)
    assert plain == {"gen_ai.request.max_tokens": 7, "gen_ai.request.temperature": 0.2}
    recorded = _request_attributes(body, record_content=True)
    assert "secret plan" in recorded["gen_ai.input.messages"]
