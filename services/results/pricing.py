"""Cost of one item from the configured per-model prices and the batch discount."""

from __future__ import annotations

from batchgate.services.common.config import Settings

PER_MILLION = 1_000_000


def item_cost(
    settings: Settings,
    model: str,
    prompt_tokens: int,
    cached_tokens: int,
    completion_tokens: int,
    discount: float,
) -> float:
    """USD; models without a price cost 0."""
    config = settings.model(model)
    if config is None:
        return 0.0
    price = config.price
    cached_price = (
        price.input_per_mtok if price.cached_input_per_mtok is None else price.cached_input_per_mtok
    )
    uncached = max(prompt_tokens - cached_tokens, 0)
    gross = (
        uncached * price.input_per_mtok
        + cached_tokens * cached_price
        + completion_tokens * price.output_per_mtok
    ) / PER_MILLION
    return gross * (1.0 - discount)
