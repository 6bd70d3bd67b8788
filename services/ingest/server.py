"""Ingest service entry: `batchgate serve ingest`."""

from __future__ import annotations

import grpc

from batchgate.internal.v1 import scheduler_pb2_grpc
from batchgate.v1 import batches_pb2, batches_pb2_grpc, files_pb2, files_pb2_grpc
from services.common import rpc_client
from services.common.config import Settings
from services.common.db import Database
from services.common.grpc_server import ServiceHost
from services.ingest.batches_servicer import BatchesServicer
from services.ingest.files_servicer import FilesServicer
from services.ingest.sweeps import run_sweeps


def build(settings: Settings, db: Database) -> ServiceHost:
    scheduler_channel = rpc_client.channel(settings, "scheduler")
    scheduler = scheduler_pb2_grpc.SchedulerServiceStub(scheduler_channel)

    def register(server: grpc.aio.Server) -> list[str]:
        files_pb2_grpc.add_FilesServiceServicer_to_server(FilesServicer(settings, db), server)
        batches_pb2_grpc.add_BatchServiceServicer_to_server(BatchesServicer(settings, db, scheduler), server)
        return [
            files_pb2.DESCRIPTOR.services_by_name["FilesService"].full_name,
            batches_pb2.DESCRIPTOR.services_by_name["BatchService"].full_name,
        ]

    async def close_channel() -> None:
        await scheduler_channel.close()

    return ServiceHost(
        name="ingest",
        port=settings.ingest_port,
        register=register,
        public=True,
        background=[lambda: run_sweeps(settings, db)],
        on_stop=[close_channel],
    )
