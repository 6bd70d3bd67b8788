"""ModelsService: `GET /v1/models`, the public model names this gateway offers.

The list is the configured catalogue (`models:` in the YAML file, or the simulated models when
none is configured): the same names record validation accepts in `body.model`.
"""

from __future__ import annotations

import grpc

from batchgate.services.common.config import Settings
from batchgate.v1 import models_pb2, models_pb2_grpc

OWNED_BY = "batchgate"


class ModelsServicer(models_pb2_grpc.ModelsServiceServicer):
    def __init__(self, settings: Settings) -> None:
        self._answer = models_pb2.ListModelsResponse(
            object="list",
            data=[
                models_pb2.Model(
                    id=model.name,
                    object="model",
                    created=0,
                    owned_by=OWNED_BY,
                    endpoints=model.served_endpoints,
                )
                for model in settings.models
            ],
        )

    async def ListModels(
        self, request: models_pb2.ListModelsRequest, context: grpc.aio.ServicerContext
    ) -> models_pb2.ListModelsResponse:
        return self._answer
