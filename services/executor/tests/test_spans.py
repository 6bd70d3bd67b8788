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


@pytest.mark.parametrize(
    ("body", "attributes"),
    [
        (b'{"model": "m", "messages": []}', {}),
        (b'{"model": "m", "seed": 3, "top_p": 0.5}', {"gen_ai.request.seed": 3, "gen_ai.request.top_p": 0.5}),
        (b'{"model": "m", "\\u006dax_tokens": 9}', {"gen_ai.request.max_tokens": 9}),  # an escaped key
        (b'{"model": "m", "note": "max_tokens"}', {}),  # the name in a value: parsed, nothing found
        (b'{"model": "m", "max_output_tokens": true}', {}),  # not a number
    ],
)
def test_request_parameters_are_found_however_the_body_spells_them(
    body: bytes, attributes: dict[str, object]
) -> None:
    assert _request_attributes(body, record_content=False) == attributes
