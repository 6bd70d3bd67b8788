"""PII redaction and the blocking filters, on texts (the e2e test sees them upstream)."""

from __future__ import annotations

import asyncio

import orjson
import pytest

from batchgate.services.common.config import Settings
from batchgate.services.common.guardrail_config import GuardrailConfig, PiiKind
from batchgate.services.common.loading import load_settings
from batchgate.services.ingest.guardrails import guardrails, redact
from batchgate.services.ingest.validation import Accepted, Rejected

ALL = frozenset(PiiKind)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("mail ada@example.co.uk now", "mail [REDACTED_EMAIL] now"),
        ("card 4111 1111 1111 1111.", "card [REDACTED_CARD]."),
        ("card 4111-1111-1111-1112 fails Luhn", "card 4111-1111-1111-1112 fails Luhn"),
        ("pay DE89 3704 0044 0532 0130 00 today", "pay [REDACTED_IBAN] today"),
        ("pay DE89370400440532013000", "pay [REDACTED_IBAN]"),
        ("bad check digits DE00370400440532013000", "bad check digits DE00370400440532013000"),
        ("call +44 20 7946 0958 or (555) 123-4567", "call [REDACTED_PHONE] or [REDACTED_PHONE]"),
        ("order 12345, 3 items, year 2026", "order 12345, 3 items, year 2026"),
        # What follows a number is not swallowed by it (they were sent as they stood).
        ("Card 4111 1111 1111 1111 123", "Card [REDACTED_CARD] 123"),
        ("Card 4111111111111111 12/27", "Card [REDACTED_CARD] 12/27"),
        ("FR76 3000 6000 0112 3456 7890 189 SVP", "[REDACTED_IBAN] SVP"),
        ("IBAN DE89370400440532013000 BIC COBADEFFXXX", "IBAN [REDACTED_IBAN] BIC COBADEFFXXX"),
        # Dates and short plain counts are not phone numbers.
        ("Delivered on 2024-05-01.", "Delivered on 2024-05-01."),
        ("on 01/05/2024 or 2024.5.1", "on 01/05/2024 or 2024.5.1"),
        ("total 1234567 units", "total 1234567 units"),
        ("call 5551234567", "call [REDACTED_PHONE]"),
        ("mail josé@bücher.de", "mail [REDACTED_EMAIL]"),
    ],
)
def test_redaction(text: str, expected: str) -> None:
    assert redact(text, ALL) == expected


def test_keywords_that_start_or_end_with_a_symbol_match_as_words() -> None:
    """`\b#confidential\b` never matched next to a space: such keywords blocked nothing."""
    settings = load_settings(environ={})
    config = GuardrailConfig(block_keywords=("#confidential", "c++", "@admin", "password"))
    for text, rule in (
        ("this is #confidential data", "keyword:#confidential"),
        ("I write C++ code", "keyword:c++"),
        ("ping @admin now", "keyword:@admin"),
        ("my password", "keyword:password"),
    ):
        blocked = _screen(config, {"messages": [{"role": "user", "content": text}]}, settings)
        assert isinstance(blocked, Rejected) and f"'{rule}'" in blocked.message, text
    kept = _screen(config, {"messages": [{"role": "user", "content": "passwords and c+"}]}, settings)
    assert isinstance(kept, Accepted)


def test_only_the_chosen_kinds_are_redacted() -> None:
    text = "ada@example.com 4111111111111111"
    assert redact(text, frozenset({PiiKind.EMAIL})) == "[REDACTED_EMAIL] 4111111111111111"


def _screen(config: GuardrailConfig, body: dict[str, object], settings: Settings) -> Accepted | Rejected:
    async def run() -> Accepted | Rejected:
        async with guardrails(config, settings) as guard:
            assert guard is not None
            return await guard.screen(Accepted("c1", orjson.dumps(body), "m", request=body))

    return asyncio.run(run())


def test_blocks_name_their_rule_and_redaction_reaches_every_text_part() -> None:
    settings = load_settings(environ={})
    config = GuardrailConfig(
        block_keywords=("Forbidden",), block_patterns=(("ticket", r"TCK-\d{4}"),), redact=ALL
    )
    body = {
        "model": "m",
        "messages": [
            {"role": "system", "content": "write to ada@example.com"},
            {"role": "user", "content": [{"type": "text", "text": "IBAN GB82 WEST 1234 5698 7654 32"}]},
        ],
        "metadata_like": "ada@example.com stays: not a message text",
    }
    screened = _screen(config, body, settings)
    assert isinstance(screened, Accepted)
    sent = orjson.loads(screened.body)
    assert sent["messages"][0]["content"] == "write to [REDACTED_EMAIL]"
    assert sent["messages"][1]["content"][0]["text"] == "IBAN [REDACTED_IBAN]"
    assert sent["metadata_like"] == body["metadata_like"]
    blocked = _screen(config, {"messages": [{"role": "user", "content": "this is forbidden."}]}, settings)
    assert blocked == Rejected(
        "guardrail_blocked", "The record was blocked by the guardrail rule 'keyword:forbidden'.", "c1"
    )
    blocked = _screen(config, {"messages": [{"role": "user", "content": "see TCK-1234"}]}, settings)
    assert isinstance(blocked, Rejected) and "'regex:ticket'" in blocked.message


def test_every_prompt_field_of_every_endpoint_is_filtered() -> None:
    """The Responses API's `instructions` (where the web panel puts its system prompt) and
    tool outputs, and the completions `suffix`, went upstream unfiltered."""
    settings = load_settings(environ={})
    config = GuardrailConfig(block_keywords=("secret",), redact=frozenset({PiiKind.EMAIL}))
    blocked = _screen(
        config, {"instructions": "the secret is 42; mail bob@example.com", "input": "hi"}, settings
    )
    assert isinstance(blocked, Rejected) and "'keyword:secret'" in blocked.message
    body = {
        "model": "m",
        "instructions": "mail bob@example.com",
        "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "to ada@example.com"}]},
            {"type": "function_call", "call_id": "c", "name": "f", "arguments": '{"to": "x@example.com"}'},
            {"type": "function_call_output", "call_id": "c", "output": "sent to eve@example.com"},
            {
                "type": "function_call_output",
                "call_id": "d",
                "output": [{"type": "input_text", "text": "z@example.com"}],
            },
        ],
    }
    screened = _screen(config, body, settings)
    assert isinstance(screened, Accepted)
    sent = orjson.loads(screened.body)
    assert sent["instructions"] == "mail [REDACTED_EMAIL]"
    assert sent["input"][0]["content"][0]["text"] == "to [REDACTED_EMAIL]"
    assert sent["input"][1] == body["input"][1]  # a replayed call: documented as not filtered
    assert sent["input"][2]["output"] == "sent to [REDACTED_EMAIL]"
    assert sent["input"][3]["output"][0]["text"] == "[REDACTED_EMAIL]"
    completion = _screen(config, {"prompt": "def f():", "suffix": "# ada@example.com"}, settings)
    assert isinstance(completion, Accepted) and completion.request["suffix"] == "# [REDACTED_EMAIL]"


@pytest.mark.parametrize("fail_closed", [True, False])
@pytest.mark.parametrize("host", ["a" * 64 + ".example", "a..b.example"], ids=["long label", "empty label"])
def test_a_moderation_url_no_resolver_takes_fails_as_an_unreachable_one(host: str, fail_closed: bool) -> None:
    """Such a URL (stored before `projects set-guardrails` refused it) made every create of the
    project fail with UnicodeError from `getaddrinfo`."""
    settings = load_settings(environ={})
    config = GuardrailConfig(
        moderation_url=f"http://{host}/v1/moderations", moderation_fail_closed=fail_closed
    )
    screened = _screen(config, {"messages": [{"role": "user", "content": "hello"}]}, settings)
    if fail_closed:
        assert screened == Rejected(
            "guardrail_blocked",
            "The record was blocked by the guardrail rule 'moderation:unavailable'.",
            "c1",
        )
    else:
        assert isinstance(screened, Accepted)
