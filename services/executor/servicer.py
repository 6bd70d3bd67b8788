"""ExecutorService: what this executor is doing (operators, health checks)."""

from __future__ import annotations

import grpc

from batchgate.internal.v1 import executor_pb2, executor_pb2_grpc
from batchgate.services.executor.worker import Executor


class ExecutorServicer(executor_pb2_grpc.ExecutorServiceServicer):
    def __init__(self, executor: Executor) -> None:
        self._executor = executor

    async def GetExecutorStatus(
        self, request: executor_pb2.GetExecutorStatusRequest, context: grpc.aio.ServicerContext
    ) -> executor_pb2.GetExecutorStatusResponse:
        return executor_pb2.GetExecutorStatusResponse(
            executor_id=self._executor.executor_id,
            in_flight=self._executor.in_flight,
            capacity=self._executor.capacity,
            finished=self._executor.stats.finished,
            refused=self._executor.stats.refused,
            lost=self._executor.stats.lost,
        )
