"""Idempotency-Key parsing and what counts as the same request."""

from __future__ import annotations

import pytest

from batchgate.services.common.errors import ApiError
from batchgate.services.ingest.idempotency import key_from_metadata, request_hash
from batchgate.v1 import batches_pb2


def test_the_key_comes_from_the_idempotency_key_header() -> None:
    assert key_from_metadata([("authorization", "Bearer x"), ("idempotency-key", "abc")]) == "abc"
    assert key_from_metadata([("authorization", "Bearer x")]) is None


@pytest.mark.parametrize("key", ["", "k" * 513, "é" * 257])
def test_keys_must_be_1_to_512_bytes(key: str) -> None:
    with pytest.raises(ApiError) as caught:
        key_from_metadata([("idempotency-key", key)])
    assert (caught.value.status, caught.value.code) == (400, "invalid_idempotency_key")


def test_a_512_byte_key_is_fine() -> None:
    assert key_from_metadata([("idempotency-key", "k" * 512)]) == "k" * 512


def _request(metadata: dict[str, str], **fields: object) -> batches_pb2.CreateBatchRequest:
    request = batches_pb2.CreateBatchRequest(
        endpoint="/v1/chat/completions", completion_window="24h", **fields
    )
    for key, value in metadata.items():  # insertion order differs between the two requests below
        request.metadata[key] = value
    return request


def test_the_same_request_hashes_the_same_whatever_the_map_order() -> None:
    one = _request({"a": "1", "b": "2"}, input_file_id="file-1")
    two = _request({"b": "2", "a": "1"}, input_file_id="file-1")
    assert request_hash(one, []) == request_hash(two, [])
    assert request_hash(one, []) != request_hash(_request({"a": "1", "b": "3"}, input_file_id="file-1"), [])
    assert request_hash(one, []) != request_hash(_request({"a": "1", "b": "2"}, input_file_id="file-2"), [])


def test_inline_requests_hash_the_same_whatever_their_key_order() -> None:
    request = _request({})
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    same = {"messages": [{"content": "hi", "role": "user"}], "model": "m"}
    assert request_hash(request, [{"body": body}]) == request_hash(request, [{"body": same}])
    assert request_hash(request, [{"body": body}]) != request_hash(request, [{"body": {**body, "n": 1}}])
    assert request_hash(request, [{"body": body}]) != request_hash(request, [{"body": body}, {"body": body}])
