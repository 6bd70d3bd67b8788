"""Results service entry: `batchgate serve results`."""

from __future__ import annotations

from batchgate.internal.v1 import recorder_pb2, recorder_pb2_grpc
from batchgate.services.common import telemetry
from batchgate.services.common.config import Settings
from batchgate.services.common.db import Database
from batchgate.services.common.grpc_server import Registry, ServiceHost
from batchgate.services.results.finalize import Finalizer
from batchgate.services.results.message_batch_results import MessageBatchResultsServicer
from batchgate.services.results.metrics import ResultsMetrics
from batchgate.services.results.recorder import Recorder
from batchgate.services.results.servicer import RecorderServicer, ResultsServicer
from batchgate.services.results.spend import register_spend_service
from batchgate.services.results.sweeps import run_finalize_sweep
from batchgate.services.results.webhook_delivery import WebhookDeliverer
from batchgate.v1 import message_batches_pb2, message_batches_pb2_grpc, results_pb2, results_pb2_grpc


def build(settings: Settings, db: Database) -> ServiceHost:
    deliverer = WebhookDeliverer(settings, db)
    metrics = ResultsMetrics(telemetry.meter("results"))
    finalizer = Finalizer(settings, db, on_event=deliverer.wake, metrics=metrics)

    def register(server: Registry) -> list[str]:
        recorder_pb2_grpc.add_RecorderServiceServicer_to_server(
            RecorderServicer(Recorder(settings, db, metrics), finalizer), server
        )
        results_pb2_grpc.add_ResultsServiceServicer_to_server(ResultsServicer(db), server)
        message_batches_pb2_grpc.add_MessageBatchResultsServiceServicer_to_server(
            MessageBatchResultsServicer(db), server
        )
        return [
            recorder_pb2.DESCRIPTOR.services_by_name["RecorderService"].full_name,
            results_pb2.DESCRIPTOR.services_by_name["ResultsService"].full_name,
            message_batches_pb2.DESCRIPTOR.services_by_name["MessageBatchResultsService"].full_name,
            register_spend_service(server, db),
        ]

    return ServiceHost(
        name="results",
        port=settings.results_port,
        register=register,
        public=True,
        background=[
            lambda: run_finalize_sweep(db, finalizer, settings.maintenance_interval_s),
            deliverer.run,
        ],
    )
