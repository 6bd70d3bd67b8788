"""A native gRPC client does the same flow through Envoy's single port, with health and reflection."""

from __future__ import annotations

import time

import grpc
import httpx
import pytest
from google.api import httpbody_pb2
from google.protobuf import descriptor_pool
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase

from batchgate.services.ingest import reflection
from batchgate.v1 import batches_pb2, batches_pb2_grpc, files_pb2, files_pb2_grpc
from tests.support import RunningStack, chat_records, jsonl, read_jsonl

BOUNDARY = "batchgate-test-boundary"


def _multipart(data: bytes) -> list[bytes]:
    head = (
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n'
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="in.jsonl"\r\n'
        f"Content-Type: application/octet-stream\r\n\r\n"
    ).encode()
    tail = f"\r\n--{BOUNDARY}--\r\n".encode()
    whole = head + data + tail
    return [whole[i : i + 1000] for i in range(0, len(whole), 1000)]  # many small messages


def test_native_grpc_client_through_envoy(shared_stack: RunningStack) -> None:
    metadata = (("authorization", f"Bearer {shared_stack.key}"),)
    records = chat_records(20, prefix="grpc")
    with grpc.insecure_channel(shared_stack.grpc_target) as channel:
        files = files_pb2_grpc.FilesServiceStub(channel)
        batches = batches_pb2_grpc.BatchServiceStub(channel)
        parts = _multipart(jsonl(records))
        messages = [
            httpbody_pb2.HttpBody(
                content_type=f"multipart/form-data; boundary={BOUNDARY}" if i == 0 else "", data=part
            )
            for i, part in enumerate(parts)
        ]
        file = files.CreateFile(iter(messages), metadata=metadata, timeout=30)
        assert file.purpose == "batch" and file.bytes == len(jsonl(records))

        batch = batches.CreateBatch(
            batches_pb2.CreateBatchRequest(
                input_file_id=file.id, endpoint="/v1/chat/completions", completion_window="24h"
            ),
            metadata=metadata,
            timeout=30,
        )
        deadline = time.monotonic() + 60
        while batch.status != "completed":
            assert time.monotonic() < deadline, batch.status
            time.sleep(0.1)
            batch = batches.GetBatch(
                batches_pb2.GetBatchRequest(batch_id=batch.id), metadata=metadata, timeout=10
            )
        assert batch.request_counts.completed == 20

        chunks = files.GetFileContent(
            files_pb2.GetFileContentRequest(file_id=batch.output_file_id.string_value),
            metadata=metadata,
            timeout=30,
        )
        lines = read_jsonl(b"".join(chunk.data for chunk in chunks))
        assert sorted(line["custom_id"] for line in lines) == sorted(r["custom_id"] for r in records)


def test_native_grpc_errors_carry_status_and_openai_body(shared_stack: RunningStack) -> None:
    with grpc.insecure_channel(shared_stack.grpc_target) as channel:
        batches = batches_pb2_grpc.BatchServiceStub(channel)
        with pytest.raises(grpc.RpcError) as caught:
            batches.GetBatch(
                batches_pb2.GetBatchRequest(batch_id="batch_missing"),
                metadata=(("authorization", f"Bearer {shared_stack.key}"),),
                timeout=10,
            )
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND
        trailers = dict(caught.value.trailing_metadata())
        assert trailers["x-oai-status"] == "404"
        assert '"code":"not_found"' in trailers["x-oai-error"]
        with pytest.raises(grpc.RpcError) as caught:
            batches.GetBatch(batches_pb2.GetBatchRequest(batch_id="batch_missing"), timeout=10)
        assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED


def test_native_grpc_inline_requests_and_presence_aware_limit(shared_stack: RunningStack) -> None:
    """Typed fields, no `http_body`: inline records travel as protobuf Values, `limit` unset
    means the default and `limit: 0` is refused like `?limit=0`."""
    metadata = (("authorization", f"Bearer {shared_stack.key}"),)
    with grpc.insecure_channel(shared_stack.grpc_target) as channel:
        batches = batches_pb2_grpc.BatchServiceStub(channel)
        request = batches_pb2.CreateBatchRequest(
            endpoint="/v1/chat/completions", completion_window="24h", metadata={"via": "grpc"}
        )
        for record in chat_records(2, prefix="grpc-inline"):
            request.requests.add().struct_value.update(record)
        batch = batches.CreateBatch(request, metadata=metadata, timeout=30)
        assert (batch.request_counts.total, batch.rejected_count) == (2, 0)
        assert batch.metadata.struct_value["via"] == "grpc"

        listed = batches.ListBatches(batches_pb2.ListBatchesRequest(), metadata=metadata, timeout=10)
        assert batch.id in [b.id for b in listed.data]
        with pytest.raises(grpc.RpcError) as caught:
            batches.ListBatches(batches_pb2.ListBatchesRequest(limit=0), metadata=metadata, timeout=10)
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert '"code":"invalid_limit"' in dict(caught.value.trailing_metadata())["x-oai-error"]


PUBLIC_SERVICES = sorted(reflection.public_services())


def test_reflection_on_envoys_port_describes_the_public_api_only(shared_stack: RunningStack) -> None:
    """What `grpcurl -plaintext localhost:8080 list` and `describe` ask, in both versions."""
    with grpc.insecure_channel(shared_stack.grpc_target) as channel:
        database = ProtoReflectionDescriptorDatabase(channel)  # v1alpha
        assert sorted(database.get_services()) == PUBLIC_SERVICES
        pool = descriptor_pool.DescriptorPool(database)
        results = pool.FindServiceByName("batchgate.v1.ResultsService")  # served by results, described too
        assert "GetBatchResults" in results.methods_by_name
        assert pool.FindMessageTypeByName("batchgate.v1.Batch").fields_by_name["id"]
        with pytest.raises(KeyError):
            pool.FindServiceByName("batchgate.internal.v1.SchedulerService")

        v1 = channel.stream_stream(
            "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
            request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
            response_deserializer=reflection_pb2.ServerReflectionResponse.FromString,
        )
        (answer,) = v1(iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=10)
        assert sorted(s.name for s in answer.list_services_response.service) == PUBLIC_SERVICES


def test_health_on_envoys_port(shared_stack: RunningStack) -> None:
    with grpc.insecure_channel(shared_stack.grpc_target) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        for service in ("", "batchgate.v1.BatchService"):
            answer = health.Check(health_pb2.HealthCheckRequest(service=service), timeout=10)
            assert answer.status == health_pb2.HealthCheckResponse.SERVING


NOT_UTF8 = b"\x0a\x02\xff\xfe"  # field 1, a string, holding bytes that are not UTF-8
NOT_A_MESSAGE = b"\xff\xff\xff"


def test_a_request_that_does_not_decode_is_invalid_argument_naming_no_python_class(
    shared_stack: RunningStack,
) -> None:
    """gRPC failed to decode these before any handler ran and answered UNKNOWN, "Unexpected
    <class 'google.protobuf.message.DecodeError'>: …" (health too; reflection INTERNAL)."""
    metadata = (("authorization", f"Bearer {shared_stack.key}"),)
    cases = [
        ("/batchgate.v1.BatchService/GetBatch", NOT_UTF8, "batch_id"),
        ("/batchgate.v1.BatchService/ListBatches", NOT_UTF8, "after"),
        ("/batchgate.v1.MessageBatchService/GetMessageBatch", NOT_UTF8, "message_batch_id"),
        ("/batchgate.v1.ResultsService/GetUsage", NOT_A_MESSAGE, None),
        ("/grpc.health.v1.Health/Check", NOT_UTF8, "service"),
    ]
    with grpc.insecure_channel(shared_stack.grpc_target) as channel:
        for method, payload, field in cases:
            call = channel.unary_unary(method)
            with pytest.raises(grpc.RpcError) as caught:
                call(payload, metadata=metadata, timeout=10)
            assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (method, caught.value.details())
            details = caught.value.details() or ""
            assert "class" not in details and "DecodeError" not in details, details
            if field is not None:
                assert f"'{field}'" in details and "UTF-8" in details, details
            if method.startswith("/batchgate.v1."):
                assert dict(caught.value.trailing_metadata())["x-oai-status"] == "400"

        reflect = channel.stream_stream("/grpc.reflection.v1.ServerReflection/ServerReflectionInfo")
        bad_symbol = b"\x22\x02\xff\xfe"  # file_containing_symbol (4), not UTF-8
        with pytest.raises(grpc.RpcError) as caught:
            list(reflect(iter([bad_symbol]), timeout=10))
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, caught.value.details()
        assert "file_containing_symbol" in (caught.value.details() or "")


def test_a_plain_http_request_to_a_grpc_method_path_is_unknown_url(shared_stack: RunningStack) -> None:
    """Such a request went to the service as it came, was reset and retried: 503 "upstream
    connect error"; it is 404 `unknown_url`, as any path without a route, and gRPC still works."""
    paths = [
        "/batchgate.v1.ModelsService/ListModels",
        "/batchgate.v1.BatchService/CreateBatch",
        "/batchgate.v1.MessageBatchService/GetMessageBatch",
        "/grpc.health.v1.Health/Check",
        "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
    ]
    headers = {"Authorization": f"Bearer {shared_stack.key}"}
    for path in paths:
        for content_type in ("application/json", "text/plain"):
            answer = httpx.post(
                f"http://127.0.0.1:{shared_stack.settings.port}{path}",
                content=b"{}",
                headers={**headers, "Content-Type": content_type},
                timeout=30,
            )
            assert answer.status_code == 404, (path, answer.text)
            error = answer.json()["error"]
            assert (error["code"], error["type"]) == ("unknown_url", "invalid_request_error"), answer.text
    with grpc.insecure_channel(shared_stack.grpc_target) as channel:
        answer = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
        assert answer.status == health_pb2.HealthCheckResponse.SERVING
