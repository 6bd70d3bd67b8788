"""Scheduler service entry: `batchgate serve scheduler`."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import grpc

from batchgate.internal.v1 import (
    recorder_pb2,
    recorder_pb2_grpc,
    scheduler_pb2,
    scheduler_pb2_grpc,
    templates_pb2_grpc,
)
from batchgate.services.common import cron, rpc_client, telemetry
from batchgate.services.common.config import Settings
from batchgate.services.common.db import Database
from batchgate.services.common.db.dialect import Listener
from batchgate.services.common.db.native_batches import NATIVE_HOLDER
from batchgate.services.common.grpc_server import Registry, ServiceHost
from batchgate.services.scheduler.budgets import Budgets
from batchgate.services.scheduler.closing_feed import CLOSING_CHANNEL, ClosingFeed
from batchgate.services.scheduler.cron_ticks import CronTicker
from batchgate.services.scheduler.maintenance import Maintenance
from batchgate.services.scheduler.metrics import SchedulerMetrics
from batchgate.services.scheduler.native_batches import NativeBatches
from batchgate.services.scheduler.provider_batches import ProviderError
from batchgate.services.scheduler.queue import Queue
from batchgate.services.scheduler.rate_shares import RateShares
from batchgate.services.scheduler.retention import Retention
from batchgate.services.scheduler.servicer import SchedulerServicer
from batchgate.services.scheduler.work_signal import WORK_CHANNEL, WorkSignal

log = logging.getLogger(__name__)


def build(settings: Settings, db: Database) -> ServiceHost:
    signal = WorkSignal()
    queue = Queue(db, settings.lease_ttl_s, RateShares(db, settings), signal)
    results_channel = rpc_client.channel(settings, "results", caller="scheduler")
    recorder = recorder_pb2_grpc.RecorderServiceStub(results_channel)

    async def finalize(batch_id: str) -> None:
        try:
            await recorder.FinalizeBatch(recorder_pb2.FinalizeBatchRequest(batch_id=batch_id), timeout=60)
        except grpc.aio.AioRpcError as exc:
            log.warning("FinalizeBatch(%s) failed: %s; retrying at the next tick", batch_id, exc.code())

    async def record(outcomes: Sequence[recorder_pb2.Outcome]) -> None:
        """A provider batch's outcomes, recorded as an executor's are (errors: retried later)."""
        request = recorder_pb2.RecordResultsRequest(executor_id=NATIVE_HOLDER, outcomes=outcomes)
        try:
            await recorder.RecordResults(request, timeout=60)
        except grpc.aio.AioRpcError as exc:
            raise ProviderError(f"RecordResults failed: {exc.code()}", retryable=True) from exc

    metrics = SchedulerMetrics(telemetry.meter("scheduler"))
    feed = ClosingFeed(db)
    native = NativeBatches(settings, db, record, finalize)
    maintenance = Maintenance(
        db,
        queue,
        settings.maintenance_interval_s,
        signal.wake,
        finalize,
        feed,
        metrics,
        native,
        Retention(db, settings),
    )
    ingest_channel = rpc_client.channel(settings, "ingest", caller="scheduler")
    ticker = CronTicker(
        db,
        templates_pb2_grpc.TemplateRunsServiceStub(ingest_channel),
        settings.maintenance_interval_s,
        cron.schedule_clock(settings.template_clock_file),
    )
    listeners = [Listener(db, WORK_CHANNEL, signal.wake), Listener(db, CLOSING_CHANNEL, feed.on_notify)]

    def register(server: Registry) -> list[str]:
        servicer = SchedulerServicer(settings, db, queue, signal, maintenance, feed, Budgets(db), metrics)
        scheduler_pb2_grpc.add_SchedulerServiceServicer_to_server(servicer, server)
        return [scheduler_pb2.DESCRIPTOR.services_by_name["SchedulerService"].full_name]

    async def stop() -> None:
        await native.close()
        await results_channel.close()
        await ingest_channel.close()

    return ServiceHost(
        name="scheduler",
        port=settings.scheduler_port,
        register=register,
        background=[maintenance.run, ticker.run, *(listener.run for listener in listeners)],
        before_stop=[feed.close],
        on_stop=[stop],
    )
