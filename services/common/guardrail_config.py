"""A project's guardrail settings: which filters run on its message texts at create.

Stored inside the project's policy JSON (`access_policy.Policy.guardrails`) and set with
`batchgate projects set-guardrails`; ingest builds the chain from them
(`batchgate.services.ingest.guardrails`). Off by default: a project without them has no chain at all.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class PiiKind(StrEnum):
    """What the redaction filter finds and replaces with `[REDACTED_<KIND>]`."""

    EMAIL = "email"
    PHONE = "phone"
    CARD = "card"
    IBAN = "iban"


@dataclass(frozen=True, kw_only=True)
class GuardrailConfig:
    block_keywords: tuple[str, ...] = ()
    """Words (case-insensitive, whole words) that block a record."""
    block_patterns: tuple[tuple[str, str], ...] = ()
    """(rule name, regular expression) pairs that block a record when the expression matches."""
    redact: frozenset[PiiKind] = frozenset()
    moderation_url: str | None = None
    """An OpenAI-moderation-shaped endpoint (`POST {"input": text}` → `results[].flagged`),
    called under the webhook address policy (`webhook_allowed_networks`)."""
    moderation_timeout_s: float = 5.0
    moderation_fail_closed: bool = False
    """When the endpoint fails or times out: block the record (closed) or let it through (open)."""

    @property
    def enabled(self) -> bool:
        return bool(self.block_keywords or self.block_patterns or self.redact or self.moderation_url)

    def check(self) -> None:
        """ValueError naming the first unusable setting (a pattern that does not compile)."""
        for name, pattern in self.block_patterns:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"block pattern {name!r} does not compile: {exc}") from None
        if self.moderation_timeout_s <= 0:
            raise ValueError("the moderation timeout must be positive")

    def as_json(self) -> dict[str, Any]:
        return {
            "block_keywords": list(self.block_keywords),
            "block_patterns": [list(p) for p in self.block_patterns],
            "redact": sorted(self.redact),
            "moderation_url": self.moderation_url,
            "moderation_timeout_s": self.moderation_timeout_s,
            "moderation_fail_closed": self.moderation_fail_closed,
        }

    @classmethod
    def from_json(cls, stored: dict[str, Any]) -> GuardrailConfig:
        return cls(
            block_keywords=tuple(stored.get("block_keywords") or ()),
            block_patterns=tuple((str(n), str(p)) for n, p in stored.get("block_patterns") or ()),
            redact=frozenset(PiiKind(k) for k in stored.get("redact") or ()),
            moderation_url=stored.get("moderation_url"),
            moderation_timeout_s=float(stored.get("moderation_timeout_s", 5.0)),
            moderation_fail_closed=bool(stored.get("moderation_fail_closed", False)),
        )

    def describe(self) -> str:
        parts = []
        if self.block_keywords:
            parts.append("block-keywords=" + ",".join(self.block_keywords))
        if self.block_patterns:
            parts.append("block-regex=" + ",".join(name for name, _ in self.block_patterns))
        if self.redact:
            parts.append("redact=" + ",".join(sorted(self.redact)))
        if self.moderation_url:
            fail = "closed" if self.moderation_fail_closed else "open"
            parts.append(f"moderation={self.moderation_url} (fail {fail}, {self.moderation_timeout_s:g}s)")
        return "guardrails: " + " ".join(parts) if parts else "no guardrails"
