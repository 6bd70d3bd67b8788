"""How a batch runs: which provider's batch API a model's batches can be passed through to, and
the execution a batch of a model gets when it does not say (ingest and the scheduler)."""

from __future__ import annotations

from batchgate.services.common.catalogue import EXECUTE, ProviderConfig
from batchgate.services.common.config import Settings


def batch_provider(settings: Settings, model: str | None) -> ProviderConfig | None:
    """The provider whose batch API a batch of `model` can be passed through to, or None."""
    config = settings.model(model) if model else None
    provider = settings.provider(config.provider) if config else None
    return provider if provider is not None and provider.batch_api else None


def default_execution(settings: Settings, model: str | None) -> str:
    """How a batch of `model` runs when it does not say: the model's, else its provider's."""
    config = settings.model(model) if model else None
    provider = settings.provider(config.provider) if config else None
    if config is None or provider is None:
        return EXECUTE
    return config.batch_mode or provider.batch_mode
