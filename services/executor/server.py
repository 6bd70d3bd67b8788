"""Executor service entry: `batchgate serve executor`."""

from __future__ import annotations

from batchgate.internal.v1 import executor_pb2, executor_pb2_grpc, recorder_pb2_grpc, scheduler_pb2_grpc
from batchgate.services.common import rpc_client, telemetry
from batchgate.services.common.config import Settings
from batchgate.services.common.grpc_server import Registry, ServiceHost
from batchgate.services.executor.budget import BudgetClient
from batchgate.services.executor.held import new_executor_id
from batchgate.services.executor.limits import Dispatcher
from batchgate.services.executor.metrics import ExecutorMetrics
from batchgate.services.executor.runner import ItemRunner
from batchgate.services.executor.servicer import ExecutorServicer
from batchgate.services.executor.worker import Executor


def build(settings: Settings, port: int | None = None) -> ServiceHost:
    scheduler_channel = rpc_client.channel(settings, "scheduler", caller="executor")
    results_channel = rpc_client.channel(settings, "results", caller="executor")
    metrics = ExecutorMetrics(telemetry.meter("executor"))
    scheduler = scheduler_pb2_grpc.SchedulerServiceStub(scheduler_channel)
    executor_id = new_executor_id()
    dispatcher = Dispatcher(settings.executor_concurrency)
    budgets = BudgetClient(scheduler, executor_id, dispatcher.dispatch)
    runner = ItemRunner(settings, metrics, dispatcher, budgets)
    executor = Executor(
        settings, scheduler, recorder_pb2_grpc.RecorderServiceStub(results_channel), runner, executor_id
    )
    metrics.watch_held(lambda: executor.held)

    def register(server: Registry) -> list[str]:
        executor_pb2_grpc.add_ExecutorServiceServicer_to_server(ExecutorServicer(executor), server)
        return [executor_pb2.DESCRIPTOR.services_by_name["ExecutorService"].full_name]

    async def stop() -> None:
        await runner.close()
        await scheduler_channel.close()
        await results_channel.close()

    return ServiceHost(
        name="executor",
        port=settings.executor_port if port is None else port,
        register=register,
        background=[executor.run],
        before_stop=[executor.shutdown],
        on_stop=[stop],
    )
