"""Budget holds and per-caller limits, decided when a batch is published.

A batch holds its worst-case cost against its key's and project's budgets from the moment it is
published (`validating → in_progress`) until it ends: what its accepted records could cost if
each used all the output it may (`max_tokens`/`max_completion_tokens`, else the model's
`hold_max_tokens`) on top of its estimated input, at the model's price (the dearest of it and
the fallbacks it may run on) less the batch discount. A record that calls tools or runs a
workflow makes as many model calls as its loop takes, each reading what the last ones wrote: it
holds its `max_tokens` (prompt + completion over all its calls) at the higher of the model's
two prices, and the executor starts no call that could pass it (a hold of one call let ten tool
records spend $0.40 on a $0.01 budget). While a batch is open it counts as `max(hold, cost so
far)`; once it ends, as its real cost: the hold is released at settlement and the real cost
charged, with no write of its own (`batches.committed_spend`).

The check and the hold are one transaction that first locks the project's and the key's rows
(`projects.lock_budgets`), so two creates cannot both pass on the same remainder: the second
waits for the first to commit, then sees its hold. The same lock makes the policy's
`max_concurrent_batches` exact.
"""

from __future__ import annotations

from typing import Any

from batchgate.services.common import errors
from batchgate.services.common.caller import Principal
from batchgate.services.common.catalogue import ModelConfig, Price
from batchgate.services.common.config import Settings
from batchgate.services.common.db import AnyRow, Connection, Database, batches, projects
from batchgate.services.common.faults import pause_point
from batchgate.services.common.record_texts import estimate_input_tokens
from batchgate.services.common.token_usage import output_allowance
from batchgate.services.common.tool_config import CONFIG_KEY, EXTENSION_KEY
from batchgate.services.common.workflow_config import WORKFLOW_KEY
from batchgate.services.ingest.validation import Accepted

PER_MILLION = 1_000_000


class HoldTally:
    """The worst-case cost of a batch's accepted records, summed as they are checked."""

    def __init__(self, settings: Settings, discount: float) -> None:
        self._settings = settings
        self._discount = discount
        self.usd = 0.0

    def add(self, record: Accepted) -> None:
        config = self._settings.model(record.model)
        if config is None:
            return
        price = worst_price(self._settings, config)
        if price.input_per_mtok == 0 and price.output_per_mtok == 0:
            return
        request = record.request
        bound = loop_tokens(request)
        if bound is not None:
            gross = bound * max(price.input_per_mtok, price.output_per_mtok) / PER_MILLION
        else:
            gross = (
                estimate_input_tokens(request) * price.input_per_mtok
                + output_allowance(request, config.hold_max_tokens) * price.output_per_mtok
            ) / PER_MILLION
        self.usd += gross * (1.0 - self._discount)


def worst_price(settings: Settings, config: ModelConfig) -> Price:
    """The highest input and output prices of the model and the fallbacks it may run on once
    its retries are spent: a hold at its own price let a batch that fell back to a dearer model
    spend seven times its budget."""
    prices = [config.price]
    for name in config.fallbacks:
        fallback = settings.model(name)
        if fallback is not None:
            prices.append(fallback.price)
    if len(prices) == 1:
        return config.price
    return Price(
        input_per_mtok=max(p.input_per_mtok for p in prices),
        output_per_mtok=max(p.output_per_mtok for p in prices),
    )


def loop_tokens(request: dict[str, Any]) -> int | None:
    """The `max_tokens` of an accepted record's tool_config or workflow (stored normalised:
    always there), or None for a record of one call."""
    extension = request.get(EXTENSION_KEY)
    if not isinstance(extension, dict):
        return None
    for key in (WORKFLOW_KEY, CONFIG_KEY):
        loop = extension.get(key)
        if isinstance(loop, dict):
            return int(loop["max_tokens"])
    return None


def _refuse(who: str, code: str, hold: float, budget: float, committed: float) -> errors.ApiError:
    remaining = max(budget - committed, 0.0)
    return errors.ApiError(
        402,
        f"This batch holds up to ${hold:.6f} (its worst-case cost) but {who} has ${remaining:.6f} "
        f"left of its ${budget:.6f} budget (${committed:.6f} spent or held by other batches).",
        code,
        extra={"hold_usd": round(hold, 6), "remaining_usd": round(remaining, 6)},
    )


async def admit(db: Database, conn: Connection, caller: Principal, hold_usd: float) -> None:
    """Within the publishing transaction: lock the caller's budgets, then refuse (402 naming
    the hold and the remainder; 429 at the concurrency limit) or let the batch in. The hold
    itself is written with the batch's transition (`hold_usd`)."""
    row = await projects.lock_budgets(db, conn, caller.key_id)
    refused = await refusal(conn, caller, row, hold_usd)
    if refused is not None:
        raise refused


async def verdict(conn: Connection, caller: Principal, hold_usd: float) -> errors.ApiError | None:
    """A dry run's answer to "would this hold be admitted now?": what `admit` would refuse it
    with, or None; nothing is locked or written."""
    return await refusal(conn, caller, await projects.budgets(conn, caller.key_id), hold_usd)


async def refusal(
    conn: Connection, caller: Principal, row: AnyRow | None, hold_usd: float
) -> errors.ApiError | None:
    """Why a batch holding `hold_usd` may not open for `caller`, whose budgets are `row`
    (`projects.budgets`): too many open batches (429) or a hold that does not fit (402)."""
    open_project, open_key = await batches.open_counts(conn, caller.project_id, caller.key_id)
    for limit, count, who in (
        (caller.project_policy.max_concurrent_batches, open_project, "This project"),
        (caller.key_policy.max_concurrent_batches, open_key, "This API key"),
    ):
        if limit is not None and count >= limit:
            return errors.ApiError(
                429,
                f"{who} has {count} batches open, its limit; create more once some have ended.",
                "too_many_open_batches",
            )
    if row is None or (row.key_budget is None and row.project_budget is None):
        return None
    key_committed, project_committed = await batches.committed_spend(conn, caller.project_id, caller.key_id)
    await pause_point("ingest.create.hold_checked")
    if row.key_budget is not None and key_committed + hold_usd > row.key_budget:
        return _refuse("this API key", "key_budget_exceeded", hold_usd, row.key_budget, key_committed)
    if row.project_budget is not None and project_committed + hold_usd > row.project_budget:
        return _refuse(
            "this project", "project_budget_exceeded", hold_usd, row.project_budget, project_committed
        )
    return None
