"""Spend budgets per API key and per project, enforced when a batch is created.

Budgets live in ingest's own tables (`api_keys.budget_usd`, `projects.budget_usd`); spend
is the sum of recorded usage, which the results service owns and reports over
`SpendService`. A create whose key or project has used up its budget gets 402 before
anything is stored. Budgets bound what is started, not what a running batch goes on to
spend: a batch created under budget runs to the end.
"""

from __future__ import annotations

import grpc

from batchgate.internal.v1 import spend_pb2, spend_pb2_grpc
from batchgate.services.common import errors
from batchgate.services.common.caller import Principal
from batchgate.services.common.db import Database, projects

SPEND_TIMEOUT_S = 10.0


async def check_budgets(db: Database, spend: spend_pb2_grpc.SpendServiceStub, caller: Principal) -> None:
    """402 `key_budget_exceeded` / `project_budget_exceeded` when a budget is used up."""
    async with db.read() as conn:
        row = await projects.budgets(conn, caller.key_id)
    if row is None or (row.key_budget is None and row.project_budget is None):
        return
    try:
        used = await spend.GetSpend(
            spend_pb2.GetSpendRequest(project_id=caller.project_id, api_key_id=caller.key_id),
            timeout=SPEND_TIMEOUT_S,
        )
    except grpc.aio.AioRpcError as exc:
        raise errors.ApiError(
            503,
            "Spend could not be checked against this key's budget; nothing was created. Retry later.",
            "budget_check_unavailable",
        ) from exc
    if row.key_budget is not None and used.api_key_spend_usd >= row.key_budget:
        raise errors.ApiError(
            402,
            f"This API key has spent ${used.api_key_spend_usd:.6f} of its ${row.key_budget:.6f} budget.",
            "key_budget_exceeded",
        )
    if row.project_budget is not None and used.project_spend_usd >= row.project_budget:
        raise errors.ApiError(
            402,
            f"This project has spent ${used.project_spend_usd:.6f} of its ${row.project_budget:.6f} budget.",
            "project_budget_exceeded",
        )
