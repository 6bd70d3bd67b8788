"""gRPC server reflection of the public API, for native gRPC clients on Envoy's port.

`grpcurl -plaintext localhost:8080 list` asks Envoy, which routes reflection (and health) to
ingest, the front door. So ingest describes the whole public API as Envoy's port serves it,
results' ResultsService included, plus health and reflection itself. It answers from a pool
of its own that holds only those files and what they import, so the internal services
(`batchgate.internal.*`) are neither listed nor described, even when asked for by name.
Both protocol versions are served: v1alpha by `grpcio-reflection`, and v1 (what newer grpcurl
asks first) by the same servicer, since the two versions' messages are identical on the wire;
the pool holds a v1 copy of the reflection file so that `describe` works for it too.
"""

from __future__ import annotations

from functools import cache

import grpc
from google.protobuf import descriptor, descriptor_pb2, descriptor_pool
from grpc_health.v1 import health_pb2
from grpc_reflection.v1alpha import reflection, reflection_pb2, reflection_pb2_grpc

from batchgate.services.common.grpc_server import Registry
from batchgate.v1 import batches_pb2, files_pb2, message_batches_pb2, models_pb2, results_pb2, templates_pb2

V1_SERVICE = "grpc.reflection.v1.ServerReflection"
_V1ALPHA_PACKAGE = "grpc.reflection.v1alpha"
_V1_PACKAGE = "grpc.reflection.v1"
_PUBLIC_FILES = (
    files_pb2,
    batches_pb2,
    results_pb2,
    models_pb2,
    templates_pb2,
    message_batches_pb2,
    health_pb2,
    reflection_pb2,
)


def public_services() -> list[str]:
    """What reflection lists: the public API, health and reflection."""
    return [
        files_pb2.DESCRIPTOR.services_by_name["FilesService"].full_name,
        batches_pb2.DESCRIPTOR.services_by_name["BatchService"].full_name,
        results_pb2.DESCRIPTOR.services_by_name["ResultsService"].full_name,
        models_pb2.DESCRIPTOR.services_by_name["ModelsService"].full_name,
        message_batches_pb2.DESCRIPTOR.services_by_name["MessageBatchService"].full_name,
        message_batches_pb2.DESCRIPTOR.services_by_name["MessageBatchResultsService"].full_name,
        templates_pb2.DESCRIPTOR.services_by_name["BatchTemplateService"].full_name,
        health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
        reflection.SERVICE_NAME,
        V1_SERVICE,
    ]


def _v1_reflection_file() -> descriptor_pb2.FileDescriptorProto:
    """grpc/reflection/v1/reflection.proto, derived from the v1alpha file (same messages)."""
    proto = descriptor_pb2.FileDescriptorProto.FromString(reflection_pb2.DESCRIPTOR.serialized_pb)
    proto.name = "grpc/reflection/v1/reflection.proto"
    proto.package = _V1_PACKAGE
    old, new = f".{_V1ALPHA_PACKAGE}.", f".{_V1_PACKAGE}."
    for message in proto.message_type:
        for message_field in message.field:
            if message_field.HasField("type_name"):
                message_field.type_name = message_field.type_name.replace(old, new)
    for service in proto.service:
        for method in service.method:
            method.input_type = method.input_type.replace(old, new)
            method.output_type = method.output_type.replace(old, new)
    return proto


@cache
def public_pool() -> descriptor_pool.DescriptorPool:
    """The files reflection may describe: the public ones and their imports, nothing else."""
    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()

    def add(file: descriptor.FileDescriptor) -> None:
        if file.name in added:
            return
        for dependency in file.dependencies:
            add(dependency)
        pool.Add(descriptor_pb2.FileDescriptorProto.FromString(file.serialized_pb))
        added.add(file.name)

    for module in _PUBLIC_FILES:
        add(module.DESCRIPTOR)
    pool.Add(_v1_reflection_file())
    return pool


def register(server: Registry) -> list[str]:
    """Serve reflection (v1 and v1alpha) on `server`; returns the two service names."""
    servicer = reflection.aio.ReflectionServicer(public_services(), pool=public_pool())
    reflection_pb2_grpc.add_ServerReflectionServicer_to_server(servicer, server)
    v1 = grpc.method_handlers_generic_handler(
        V1_SERVICE,
        {
            "ServerReflectionInfo": grpc.stream_stream_rpc_method_handler(
                servicer.ServerReflectionInfo,
                request_deserializer=reflection_pb2.ServerReflectionRequest.FromString,
                response_serializer=reflection_pb2.ServerReflectionResponse.SerializeToString,
            )
        },
    )
    server.add_generic_rpc_handlers((v1,))
    return [reflection.SERVICE_NAME, V1_SERVICE]
