"""Ingest service entry: `batchgate serve ingest`."""

from __future__ import annotations

import grpc

from batchgate.internal.v1 import scheduler_pb2_grpc, spend_pb2_grpc
from batchgate.services.common import rpc_client, telemetry
from batchgate.services.common.config import Settings
from batchgate.services.common.db import Database
from batchgate.services.common.grpc_server import ServiceHost
from batchgate.services.ingest import reflection
from batchgate.services.ingest.batch_create import BatchCreator
from batchgate.services.ingest.batches_servicer import BatchesServicer
from batchgate.services.ingest.files_servicer import FilesServicer
from batchgate.services.ingest.idempotency import IdempotencyKeys
from batchgate.services.ingest.metrics import IngestMetrics
from batchgate.services.ingest.models_servicer import ModelsServicer
from batchgate.services.ingest.sweeps import run_sweeps
from batchgate.v1 import (
    batches_pb2,
    batches_pb2_grpc,
    files_pb2,
    files_pb2_grpc,
    models_pb2,
    models_pb2_grpc,
)


def build(settings: Settings, db: Database) -> ServiceHost:
    scheduler_channel = rpc_client.channel(settings, "scheduler", caller="ingest")
    results_channel = rpc_client.channel(settings, "results", caller="ingest")
    scheduler = scheduler_pb2_grpc.SchedulerServiceStub(scheduler_channel)
    idempotency = IdempotencyKeys(db, settings.idempotency_ttl_s, settings.validating_timeout_s)
    creator = BatchCreator(
        settings,
        db,
        spend_pb2_grpc.SpendServiceStub(results_channel),
        idempotency,
        IngestMetrics(telemetry.meter("ingest")),
    )

    def register(server: grpc.aio.Server) -> list[str]:
        files_pb2_grpc.add_FilesServiceServicer_to_server(FilesServicer(settings, db), server)
        batches_pb2_grpc.add_BatchServiceServicer_to_server(
            BatchesServicer(settings, db, scheduler, creator), server
        )
        models_pb2_grpc.add_ModelsServiceServicer_to_server(ModelsServicer(settings), server)
        return [
            files_pb2.DESCRIPTOR.services_by_name["FilesService"].full_name,
            batches_pb2.DESCRIPTOR.services_by_name["BatchService"].full_name,
            models_pb2.DESCRIPTOR.services_by_name["ModelsService"].full_name,
            *reflection.register(server),
        ]

    async def close_channels() -> None:
        await scheduler_channel.close()
        await results_channel.close()

    return ServiceHost(
        name="ingest",
        port=settings.ingest_port,
        register=register,
        public=True,
        background=[lambda: run_sweeps(settings, db, idempotency)],
        on_stop=[close_channels],
    )
