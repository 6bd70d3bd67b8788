"""What a project, or one of its keys, may do: the access policy, and a key's scopes.

A project has a policy; each of its keys may have one too, which only narrows the project's
(`Policy.narrowed_by`): a key can be denied a model its project allows, never granted one its
project denies; the lower of two limits holds. Policies are stored as JSON on their rows
(`projects.policy`, `api_keys.policy`) and travel with the caller (`caller.Principal`), so a
request reads them with its key, cached for `auth_cache_s` like the key itself.

Scopes are per key: a key lacking the scope a method needs gets 403 `insufficient_scope`
(`require_scope`), the only 403 of the public API (a miss on someone else's data stays 404).
A key made without `--scopes` has all of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

import orjson

from batchgate.services.common import errors
from batchgate.services.common.guardrail_config import GuardrailConfig


class Scope(StrEnum):
    BATCHES_READ = "batches:read"
    BATCHES_WRITE = "batches:write"
    FILES_READ = "files:read"
    FILES_WRITE = "files:write"


ALL_SCOPES = frozenset(Scope)


class Feature(StrEnum):
    """Per-project switches of features that are off until an operator turns them on."""

    WORKFLOWS = "workflows"


# The scope each public method needs. A public method in neither this table nor
# `UNSCOPED_METHODS` is refused to every key (closed by default; a unit test names it).
METHOD_SCOPES: dict[str, Scope] = {
    "/batchgate.v1.BatchService/CreateBatch": Scope.BATCHES_WRITE,
    "/batchgate.v1.BatchService/CancelBatch": Scope.BATCHES_WRITE,
    "/batchgate.v1.BatchService/UpdateBatchMetadata": Scope.BATCHES_WRITE,
    "/batchgate.v1.BatchService/GetBatch": Scope.BATCHES_READ,
    "/batchgate.v1.BatchService/ListBatches": Scope.BATCHES_READ,
    "/batchgate.v1.ResultsService/GetBatchResults": Scope.BATCHES_READ,
    "/batchgate.v1.ResultsService/GetUsage": Scope.BATCHES_READ,
    "/batchgate.v1.ResultsService/ListUsageEvents": Scope.BATCHES_READ,
    "/batchgate.v1.ResultsService/ListWebhookDeliveries": Scope.BATCHES_READ,
    "/batchgate.v1.FilesService/CreateFile": Scope.FILES_WRITE,
    "/batchgate.v1.FilesService/DeleteFile": Scope.FILES_WRITE,
    "/batchgate.v1.FilesService/ListFiles": Scope.FILES_READ,
    "/batchgate.v1.FilesService/GetFile": Scope.FILES_READ,
    "/batchgate.v1.FilesService/GetFileContent": Scope.FILES_READ,
    "/batchgate.v1.BatchService/RetryBatch": Scope.BATCHES_WRITE,
    "/batchgate.v1.MessageBatchService/CreateMessageBatch": Scope.BATCHES_WRITE,
    "/batchgate.v1.MessageBatchService/CancelMessageBatch": Scope.BATCHES_WRITE,
    "/batchgate.v1.MessageBatchService/DeleteMessageBatch": Scope.BATCHES_WRITE,
    "/batchgate.v1.MessageBatchService/GetMessageBatch": Scope.BATCHES_READ,
    "/batchgate.v1.MessageBatchService/ListMessageBatches": Scope.BATCHES_READ,
    "/batchgate.v1.MessageBatchResultsService/GetMessageBatchResults": Scope.BATCHES_READ,
    "/batchgate.v1.BatchTemplateService/UpdateBatchTemplate": Scope.BATCHES_WRITE,
    "/batchgate.v1.BatchTemplateService/PauseBatchTemplate": Scope.BATCHES_WRITE,
    "/batchgate.v1.BatchTemplateService/ResumeBatchTemplate": Scope.BATCHES_WRITE,
    "/batchgate.v1.BatchTemplateService/DeleteBatchTemplate": Scope.BATCHES_WRITE,
    "/batchgate.v1.BatchTemplateService/ListBatchTemplates": Scope.BATCHES_READ,
    "/batchgate.v1.BatchTemplateService/GetBatchTemplate": Scope.BATCHES_READ,
}


UNSCOPED_METHODS = frozenset({"/batchgate.v1.ModelsService/ListModels"})
"""Public methods any valid key may call."""


def parse_scopes(text: str | None) -> frozenset[Scope]:
    """Scopes from their stored or typed form (comma- or space-separated); None: all of them.
    ValueError names an unknown one."""
    if text is None:
        return ALL_SCOPES
    found = set()
    for word in text.replace(",", " ").split():
        try:
            found.add(Scope(word))
        except ValueError:
            raise ValueError(f"unknown scope {word!r}; scopes: {', '.join(Scope)}") from None
    return frozenset(found)


def scopes_text(scopes: frozenset[Scope]) -> str:
    """The stored form: space-separated, in a stable order."""
    return " ".join(s.value for s in Scope if s in scopes)


def require_scope(method: str, scopes: frozenset[Scope]) -> None:
    """403 `insufficient_scope` when `method` needs a scope the key lacks."""
    if method in UNSCOPED_METHODS:
        return
    needed = METHOD_SCOPES.get(method)
    if needed is None:
        raise errors.ApiError(403, "No API key may call this method.", "insufficient_scope")
    if needed not in scopes:
        raise errors.ApiError(
            403,
            f"This API key lacks the scope '{needed}' this request needs; "
            f"it has: {scopes_text(scopes) or 'none'}.",
            "insufficient_scope",
        )


def _lower(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


@dataclass(frozen=True, kw_only=True)
class Policy:
    """Limits on what a caller may do; None everywhere is no limit (the default)."""

    allowed_models: frozenset[str] | None = None
    """Models a record may name; None: every model the gateway offers."""
    max_records: int | None = None
    """Records per batch, on top of the gateway's `max_batch_records`."""
    max_concurrent_batches: int | None = None
    """Batches not yet ended at once (counted per project, or per key for a key's policy)."""
    expedited: bool | None = None
    """False: `priority: "expedited"` is refused (409 `feature_disabled`)."""
    features: frozenset[Feature] = field(default_factory=frozenset)
    """Features turned on (project policies only)."""
    guardrails: GuardrailConfig | None = None
    """Filters on message text at create (project policies only; None: off)."""
    rate_share: float | None = None
    """Share (0–1) of each provider's request budget the project's items may use (project only)."""
    retention_days: float | None = None
    """Days a batch's data is kept after it ends (project only; None: the setting; 0: keep)."""
    bookkeeping_days: float | None = None
    """Days a purged batch's bookkeeping is kept after it ends (project only; None: the setting)."""

    def narrowed_by(self, key: Policy) -> Policy:
        """This (project) policy as `key`'s policy narrows it."""
        models = self.allowed_models
        if key.allowed_models is not None:
            models = key.allowed_models if models is None else models & key.allowed_models
        return replace(
            self,
            allowed_models=models,
            max_records=_lower(self.max_records, key.max_records),
            expedited=False if False in (self.expedited, key.expedited) else None,
        )

    def to_json(self) -> str | None:
        """The stored form (None for the default policy)."""
        stored: dict[str, Any] = {
            "allowed_models": sorted(self.allowed_models) if self.allowed_models is not None else None,
            "max_records": self.max_records,
            "max_concurrent_batches": self.max_concurrent_batches,
            "expedited": self.expedited,
            "features": sorted(self.features) or None,
            "guardrails": self.guardrails.as_json() if self.guardrails and self.guardrails.enabled else None,
            "rate_share": self.rate_share,
            "retention_days": self.retention_days,
            "bookkeeping_days": self.bookkeeping_days,
        }
        stored = {k: v for k, v in stored.items() if v is not None}
        return orjson.dumps(stored).decode() if stored else None

    @classmethod
    def from_json(cls, text: str | None) -> Policy:
        if not text:
            return cls()
        stored = orjson.loads(text)
        models = stored.get("allowed_models")
        return cls(
            allowed_models=frozenset(models) if models is not None else None,
            max_records=stored.get("max_records"),
            max_concurrent_batches=stored.get("max_concurrent_batches"),
            expedited=stored.get("expedited"),
            features=frozenset(Feature(f) for f in stored.get("features") or ()),
            guardrails=GuardrailConfig.from_json(stored["guardrails"]) if stored.get("guardrails") else None,
            rate_share=stored.get("rate_share"),
            retention_days=stored.get("retention_days"),
            bookkeeping_days=stored.get("bookkeeping_days"),
        )

    def describe(self) -> str:
        """One line for `keys list` / `projects list`."""
        parts = []
        if self.allowed_models is not None:
            parts.append("models=" + (",".join(sorted(self.allowed_models)) or "none"))
        if self.max_records is not None:
            parts.append(f"max-records={self.max_records}")
        if self.max_concurrent_batches is not None:
            parts.append(f"max-concurrent={self.max_concurrent_batches}")
        if self.expedited is False:
            parts.append("no-expedited")
        if self.features:
            parts.append("features=" + ",".join(sorted(self.features)))
        if self.rate_share is not None:
            parts.append(f"rate-share={self.rate_share:g}")
        if self.retention_days is not None:
            parts.append(f"retention={self.retention_days:g}d")
        if self.bookkeeping_days is not None:
            parts.append(f"bookkeeping={self.bookkeeping_days:g}d")
        if self.guardrails is not None and self.guardrails.enabled:
            parts.append(self.guardrails.describe())
        return " ".join(parts) or "no limits"


def allowed_models_json(policy: Policy) -> str | None:
    """The models `policy` allows as a batch stores them (`batches.allowed_models`): the
    executor holds its records' fallbacks to them. None when any model is allowed."""
    if policy.allowed_models is None:
        return None
    return orjson.dumps(sorted(policy.allowed_models)).decode()


def require_feature(policy: Policy, feature: Feature) -> None:
    """409 `feature_disabled` unless the caller's project has `feature` turned on."""
    if feature not in policy.features:
        raise errors.conflict(
            f"The feature '{feature}' is not enabled for this project; an operator turns it on "
            f"with `batchgate projects set-policy PROJECT --features {feature}`.",
            "feature_disabled",
        )


def require_expedited(policy: Policy) -> None:
    """409 `feature_disabled` when the caller may not ask for `priority: "expedited"`."""
    if policy.expedited is False:
        raise errors.conflict(
            "Expedited batches are not enabled for this API key or project.", "feature_disabled"
        )
