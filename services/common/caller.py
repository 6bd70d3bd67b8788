"""Who is calling a public RPC: the `Principal`, where the auth wrapper puts it, and where a
request carries its key.

Kept apart from `auth` (keys in the database) so the gRPC host can name a caller without
loading the database layer: the executor serves no public method and never needs it.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterable
from dataclasses import dataclass, field

from batchgate.services.common.access_policy import ALL_SCOPES, Policy, Scope


@dataclass(frozen=True)
class Principal:
    """Who is calling: the project whose data they may see, the key they used, what that key
    may do (`scopes`) and the policies that bound it (the project's, and the key's own)."""

    project_id: str
    key_id: str
    scopes: frozenset[Scope] = ALL_SCOPES
    project_policy: Policy = field(default_factory=Policy)
    key_policy: Policy = field(default_factory=Policy)

    @property
    def policy(self) -> Policy:
        """The project's policy as the key's narrows it."""
        return self.project_policy.narrowed_by(self.key_policy)


current_principal: contextvars.ContextVar[Principal] = contextvars.ContextVar("current_principal")


def principal() -> Principal:
    """The caller of the RPC being served (set by the auth wrapper)."""
    return current_principal.get()


def api_key_from_metadata(metadata: Iterable[tuple[str, str | bytes]]) -> str | None:
    """The API key in `authorization: Bearer …` or `x-api-key`, if any."""
    for name, value in metadata:
        if isinstance(value, bytes):
            continue
        if name == "authorization" and value.lower().startswith("bearer "):
            return value[7:].strip()
        if name == "x-api-key":
            return value.strip()
    return None
