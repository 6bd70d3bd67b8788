"""Ingest service entry: `batchgate serve ingest`."""

from __future__ import annotations

import asyncio

from batchgate.internal.v1 import scheduler_pb2_grpc, spend_pb2_grpc
from batchgate.internal.v1 import templates_pb2 as internal_templates_pb2
from batchgate.internal.v1 import templates_pb2_grpc as internal_templates_pb2_grpc
from batchgate.services.common import cron, rpc_client, telemetry
from batchgate.services.common.config import Settings
from batchgate.services.common.db import Database
from batchgate.services.common.grpc_server import Registry, ServiceHost
from batchgate.services.ingest import reflection
from batchgate.services.ingest.batch_create import BatchCreator
from batchgate.services.ingest.batches_servicer import BatchesServicer
from batchgate.services.ingest.estimate import warm_tokenizers
from batchgate.services.ingest.files_servicer import FilesServicer
from batchgate.services.ingest.idempotency import IdempotencyKeys
from batchgate.services.ingest.message_batches_servicer import MessageBatchesServicer
from batchgate.services.ingest.message_requests import message_batch_shape
from batchgate.services.ingest.metrics import IngestMetrics
from batchgate.services.ingest.models_servicer import ModelsServicer
from batchgate.services.ingest.sweeps import run_sweeps
from batchgate.services.ingest.template_create import TemplateMaker
from batchgate.services.ingest.template_runs import TemplateRunsServicer
from batchgate.services.ingest.templates_servicer import TemplatesServicer
from batchgate.v1 import (
    batches_pb2,
    batches_pb2_grpc,
    files_pb2,
    files_pb2_grpc,
    message_batches_pb2,
    message_batches_pb2_grpc,
    models_pb2,
    models_pb2_grpc,
    templates_pb2,
    templates_pb2_grpc,
)


def build(settings: Settings, db: Database) -> ServiceHost:
    scheduler_channel = rpc_client.channel(settings, "scheduler", caller="ingest")
    results_channel = rpc_client.channel(settings, "results", caller="ingest")
    scheduler = scheduler_pb2_grpc.SchedulerServiceStub(scheduler_channel)
    idempotency = IdempotencyKeys(db, settings.idempotency_ttl_s, settings.validating_timeout_s)
    spend = spend_pb2_grpc.SpendServiceStub(results_channel)
    metrics = IngestMetrics(telemetry.meter("ingest"))
    creator = BatchCreator(settings, db, spend, idempotency, metrics)
    message_creator = BatchCreator(settings, db, spend, idempotency, metrics, message_batch_shape(settings))
    clock = cron.schedule_clock(settings.template_clock_file)

    def register(server: Registry) -> list[str]:
        files_pb2_grpc.add_FilesServiceServicer_to_server(FilesServicer(settings, db), server)
        batches_pb2_grpc.add_BatchServiceServicer_to_server(
            BatchesServicer(settings, db, scheduler, creator, TemplateMaker(db, creator, clock)), server
        )
        templates_pb2_grpc.add_BatchTemplateServiceServicer_to_server(
            TemplatesServicer(db, creator, clock), server
        )
        internal_templates_pb2_grpc.add_TemplateRunsServiceServicer_to_server(
            TemplateRunsServicer(db, creator, scheduler, clock, metrics), server
        )
        models_pb2_grpc.add_ModelsServiceServicer_to_server(ModelsServicer(settings), server)
        message_batches_pb2_grpc.add_MessageBatchServiceServicer_to_server(
            MessageBatchesServicer(settings, db, scheduler, message_creator), server
        )
        return [
            files_pb2.DESCRIPTOR.services_by_name["FilesService"].full_name,
            batches_pb2.DESCRIPTOR.services_by_name["BatchService"].full_name,
            models_pb2.DESCRIPTOR.services_by_name["ModelsService"].full_name,
            message_batches_pb2.DESCRIPTOR.services_by_name["MessageBatchService"].full_name,
            templates_pb2.DESCRIPTOR.services_by_name["BatchTemplateService"].full_name,
            internal_templates_pb2.DESCRIPTOR.services_by_name["TemplateRunsService"].full_name,
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
        background=[
            lambda: run_sweeps(settings, db, idempotency),
            lambda: asyncio.to_thread(warm_tokenizers),
        ],
        on_stop=[close_channels],
    )
