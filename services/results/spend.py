"""SpendService: what a project and one of its keys have spent, summed from `usage_events`.

Results owns `usage_events`; ingest asks here before a create to enforce budgets, instead of
reading the table itself.
"""

from __future__ import annotations

import grpc

from batchgate.internal.v1 import spend_pb2, spend_pb2_grpc
from batchgate.services.common.db import Database, usage
from batchgate.services.common.grpc_server import Registry


async def spend_usd(db: Database, project_id: str, api_key_id: str = "") -> tuple[float, float]:
    """(project's spend, key's spend) in USD; the key's is 0 when no key is given."""
    async with db.read() as conn:
        return await usage.spend(conn, project_id, api_key_id)


class SpendServicer(spend_pb2_grpc.SpendServiceServicer):
    def __init__(self, db: Database) -> None:
        self._db = db

    async def GetSpend(
        self, request: spend_pb2.GetSpendRequest, context: grpc.aio.ServicerContext
    ) -> spend_pb2.GetSpendResponse:
        project, key = await spend_usd(self._db, request.project_id, request.api_key_id)
        return spend_pb2.GetSpendResponse(project_spend_usd=project, api_key_spend_usd=key)


def register_spend_service(server: Registry, db: Database) -> str:
    """Adds SpendService to `server`; returns its full name (for health)."""
    spend_pb2_grpc.add_SpendServiceServicer_to_server(SpendServicer(db), server)
    return str(spend_pb2.DESCRIPTOR.services_by_name["SpendService"].full_name)
