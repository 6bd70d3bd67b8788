"""Guardrails: a chain of filters over every prompt text of a record (`record_texts`: message
contents, system prompts and `instructions`, inputs, prompts, tool outputs), run at create.

A project turns them on (`batchgate projects set-guardrails`; `GuardrailConfig`). Each
filter sees a text and answers with the text to keep (maybe redacted) or a `Blocked` naming
its rule; the first block rejects the record alone (`guardrail_blocked`, with its line and
custom_id), and what the filters leave is what is stored as the item and submitted upstream.
Order: blocking rules on the text as sent, then PII redaction, then the external moderation
hook, so that the moderation service never sees what was redacted.

PII: e-mail addresses and phone numbers by pattern; card numbers only when their digits pass
the Luhn check and IBANs only when their check digits are right (`python-stdnum`, which
implements both checks, per country for IBANs), so order numbers and the like are left alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol

import aiohttp
import orjson
from stdnum import iban, luhn

from batchgate.services.common.config import Settings
from batchgate.services.common.guarded_resolver import GuardedResolver
from batchgate.services.common.guardrail_config import GuardrailConfig, PiiKind
from batchgate.services.common.jsonl import exact
from batchgate.services.common.record_texts import PROMPT_FIELDS, TEXT_KEYS
from batchgate.services.common.webhook_urls import (
    RefusedUrl,
    allowed_addresses,
    webhook_networks,
)
from batchgate.services.ingest.validation import Accepted, Rejected

BLOCKED_CODE = "guardrail_blocked"
EMAIL = re.compile(r"[\w.%+-]+@[\w-]+(?:\.[\w-]+)*\.[^\W\d_]{2,}")  # \w: `josé@bücher.de` too
CARD = re.compile(r"(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d-])")
IBAN = re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}\b")
PHONE = re.compile(r"(?<![\w+])(?:\+\d{1,3}[ .-]?)?(?:\(\d{1,4}\)[ .-]?)?\d{2,4}(?:[ .-]?\d{2,4}){1,4}(?!\w)")
CARD_DIGITS = (13, 19)
PHONE_DIGITS = (7, 15)
UNSEPARATED_PHONE_DIGITS = 10
"""A number written without separators, `+` or parentheses is a phone from 10 digits on: a
count of 1234567 units is not one."""
DATE = re.compile(r"\d{4}([-./])\d{1,2}\1\d{1,2}|\d{1,2}([-./])\d{1,2}\2\d{4}")


@dataclass(frozen=True)
class Blocked:
    rule: str


class Filter(Protocol):
    async def __call__(self, text: str) -> str | Blocked: ...


def _keyword(word: str) -> str:
    """`word` as a whole word: bounded where it starts or ends with a word character only (a
    `\b` before `#confidential` or after `c++` can never match next to a space)."""
    before = r"(?<!\w)" if re.match(r"\w", word) else ""
    after = r"(?!\w)" if re.search(r"\w$", word) else ""
    return before + re.escape(word) + after


def _keyword_filter(words: tuple[str, ...]) -> Filter:
    pattern = re.compile("(" + "|".join(_keyword(w) for w in words) + ")", re.IGNORECASE)

    async def block(text: str) -> str | Blocked:
        found = pattern.search(text)
        return Blocked(f"keyword:{found.group(1).lower()}") if found else text

    return block


def _pattern_filter(name: str, expression: str) -> Filter:
    pattern = re.compile(expression)

    async def block(text: str) -> str | Blocked:
        return Blocked(f"regex:{name}") if pattern.search(text) else text

    return block


def _leading(text: str, valid: Callable[[str], bool], label: str) -> str:
    """`text` with its longest valid leading part (cut where a space or dash separates groups)
    replaced by `label`: a card number followed by its CVV or expiry, or an IBAN by a word in
    capitals, is matched whole by its pattern and would fail the check as a whole."""
    cuts = [len(text)] + [i for i in range(len(text) - 1, 0, -1) if text[i] in " -"]
    for cut in cuts:
        if valid(text[:cut]):
            return label + text[cut:]
    return text


def _card_number(text: str) -> bool:
    digits = re.sub(r"\D", "", text)
    return CARD_DIGITS[0] <= len(digits) <= CARD_DIGITS[1] and luhn.is_valid(digits)


def _redact_card(match: re.Match[str]) -> str:
    return _leading(match.group(0), _card_number, "[REDACTED_CARD]")


def _redact_iban(match: re.Match[str]) -> str:
    return _leading(match.group(0), iban.is_valid, "[REDACTED_IBAN]")


def _redact_phone(match: re.Match[str]) -> str:
    found = match.group(0)
    digits = len(re.sub(r"\D", "", found))
    if not PHONE_DIGITS[0] <= digits <= PHONE_DIGITS[1] or DATE.fullmatch(found):
        return found
    if found.isdigit() and digits < UNSEPARATED_PHONE_DIGITS:
        return found
    return "[REDACTED_PHONE]"


def redact(text: str, kinds: frozenset[PiiKind]) -> str:
    """`text` with the PII of `kinds` replaced (IBANs and cards before phones: their digit runs
    would otherwise look like phone numbers)."""
    if PiiKind.IBAN in kinds:
        text = IBAN.sub(_redact_iban, text)
    if PiiKind.CARD in kinds:
        text = CARD.sub(_redact_card, text)
    if PiiKind.EMAIL in kinds:
        text = EMAIL.sub("[REDACTED_EMAIL]", text)
    if PiiKind.PHONE in kinds:
        text = PHONE.sub(_redact_phone, text)
    return text


def _redaction_filter(kinds: frozenset[PiiKind]) -> Filter:
    async def scrub(text: str) -> str | Blocked:
        return redact(text, kinds)

    return scrub


def _moderation_filter(config: GuardrailConfig, session: aiohttp.ClientSession) -> Filter:
    assert config.moderation_url is not None
    url = config.moderation_url
    timeout = aiohttp.ClientTimeout(total=config.moderation_timeout_s)

    async def moderate(text: str) -> str | Blocked:
        try:
            # Not followed: a redirect would lead past the address policy its URL was held to.
            async with session.post(
                url, json={"input": text}, timeout=timeout, allow_redirects=False
            ) as answer:
                if answer.status != 200:
                    raise ValueError(f"HTTP {answer.status}")
                verdict = orjson.loads(await answer.read())
            results = verdict["results"]
            if not isinstance(results, list) or not results:  # no verdict is no pass
                raise ValueError("no results")
            flagged = [r for r in results if r.get("flagged")]
        except (aiohttp.ClientError, TimeoutError, ValueError, KeyError, TypeError, AttributeError):
            return Blocked("moderation:unavailable") if config.moderation_fail_closed else text
        if not flagged:
            return text
        categories = sorted(k for r in flagged for k, v in (r.get("categories") or {}).items() if v)
        return Blocked("moderation:" + (",".join(categories) or "flagged"))

    return moderate


async def _map_texts(value: Any, apply: Callable[[str], Awaitable[str | Blocked]]) -> Any:
    """`value` with every text in it replaced by `apply`'s answer; a Blocked stops the walk."""
    if isinstance(value, str):
        return await apply(value)
    if isinstance(value, list):
        mapped = []
        for entry in value:
            result = await _map_texts(entry, apply)
            if isinstance(result, Blocked):
                return result
            mapped.append(result)
        return mapped
    if isinstance(value, dict):
        out = dict(value)
        for key in TEXT_KEYS if "role" in value or "type" in value else ():
            if key in value:
                result = await _map_texts(value[key], apply)
                if isinstance(result, Blocked):
                    return result
                out[key] = result
        return out
    return value


class Guardrails:
    """One create's chain over its project's filters (with one HTTP session for moderation)."""

    def __init__(self, filters: list[Filter]) -> None:
        self._filters = filters

    async def _apply(self, text: str) -> str | Blocked:
        for step in self._filters:
            result = await step(text)
            if isinstance(result, Blocked):
                return result
            text = result
        return text

    async def screen(self, record: Accepted) -> Accepted | Rejected:
        """The record with its texts filtered, or its rejection naming the rule that blocked it."""
        body = dict(record.request)  # its texts are replaced: a copy, not the record's
        changed = False
        for name in PROMPT_FIELDS:
            if name not in body:
                continue
            result = await _map_texts(body[name], self._apply)
            if isinstance(result, Blocked):
                return Rejected(
                    BLOCKED_CODE,
                    f"The record was blocked by the guardrail rule '{result.rule}'.",
                    record.custom_id,
                )
            changed = changed or result != body[name]
            body[name] = result
        return replace(record, body=exact(orjson.dumps(body)), request=body) if changed else record


@contextlib.asynccontextmanager
async def guardrails(config: GuardrailConfig | None, settings: Settings) -> AsyncIterator[Guardrails | None]:
    """The chain for one create (None when the project has none). A moderation URL that the
    webhook address policy refuses fails closed or open like an unreachable one."""
    if config is None or not config.enabled:
        yield None
        return
    filters: list[Filter] = []
    if config.block_keywords:
        filters.append(_keyword_filter(config.block_keywords))
    filters += [_pattern_filter(name, expression) for name, expression in config.block_patterns]
    if config.redact:
        filters.append(_redaction_filter(config.redact))
    if not config.moderation_url:
        yield Guardrails(filters)
        return
    allowed = webhook_networks(settings)
    try:
        await asyncio.wait_for(allowed_addresses(config.moderation_url, allowed), config.moderation_timeout_s)
        url_ok = True
    except (RefusedUrl, TimeoutError):
        url_ok = False
    connector = aiohttp.TCPConnector(resolver=GuardedResolver(allowed))
    async with aiohttp.ClientSession(connector=connector) as session:
        if url_ok:
            filters.append(_moderation_filter(config, session))
        elif config.moderation_fail_closed:
            filters.append(_always_blocked)
        yield Guardrails(filters)


async def _always_blocked(text: str) -> str | Blocked:
    return Blocked("moderation:unavailable")
