"""REST bodies and query strings decoded against the proto (services/common/rest_input.py).

Table-driven: each case is an input and the typed request or the OpenAI error it must give.
The descriptor checks prove the mechanism covers every public route: each body route binds
its raw body to `http_body`, and every public request field has a type the decoder handles.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest
from google.api import annotations_pb2, httpbody_pb2
from google.protobuf import descriptor_pool, json_format
from google.protobuf.message import Message

import batchgate.v1
from batchgate.gateway.render import public_methods
from batchgate.services.common import rest_input
from batchgate.services.common.errors import ApiError
from batchgate.v1 import batches_pb2, files_pb2, results_pb2


def _body(payload: Any, content_type: str = "application/json") -> httpbody_pb2.HttpBody:
    data = payload if isinstance(payload, bytes) else orjson.dumps(payload)
    return httpbody_pb2.HttpBody(content_type=content_type, data=data)


def _create(payload: Any, content_type: str = "application/json") -> batches_pb2.CreateBatchRequest:
    return batches_pb2.CreateBatchRequest(http_body=_body(payload, content_type))


@dataclass(frozen=True)
class Refused:
    name: str
    request: Message
    code: str
    param: str | None
    message: str = ""
    """A fragment the message must contain."""


REFUSED = [
    Refused(
        "an object as a map value",
        _create({"metadata": {"k": {"n": 1}}}),
        "invalid_type",
        "metadata.k",
        "Invalid type for 'metadata.k': expected a string, but got an object instead.",
    ),
    Refused("a list as a map", _create({"metadata": [{"value": 1}]}), "invalid_type", "metadata"),
    Refused("a number as a map value", _create({"metadata": {"k": 1}}), "invalid_type", "metadata.k"),
    Refused("null as a map value", _create({"metadata": {"k": None}}), "invalid_type", "metadata.k"),
    Refused(
        "an object for a string",
        _create({"endpoint": {"a": 1}}),
        "invalid_type",
        "endpoint",
        "expected a string, but got an object instead",
    ),
    Refused("a boolean for a string", _create({"endpoint": True}), "invalid_type", "endpoint", "a boolean"),
    Refused("an array for a string", _create({"input_file_id": ["f"]}), "invalid_type", "input_file_id"),
    Refused(
        "a string for an object",
        _create({"output_expires_after": "x"}),
        "invalid_type",
        "output_expires_after",
    ),
    Refused(
        "a string for an integer",
        _create({"output_expires_after": {"seconds": "3600"}}),
        "invalid_type",
        "output_expires_after.seconds",
        "expected an integer, but got a string instead",
    ),
    Refused(
        "a fraction for an integer",
        _create({"output_expires_after": {"seconds": 1.5}}),
        "invalid_type",
        "output_expires_after.seconds",
        "but got a decimal number instead",
    ),
    Refused(
        "a boolean for an integer",
        _create({"output_expires_after": {"seconds": True}}),
        "invalid_type",
        "output_expires_after.seconds",
    ),
    Refused(
        "an integer beyond int32",
        _create({"output_expires_after": {"seconds": 2**31}}),
        "integer_above_max_value",
        "output_expires_after.seconds",
        "Expected a value <= 2147483647",
    ),
    Refused(
        "an integer below int32",
        _create({"output_expires_after": {"seconds": -(2**31) - 1}}),
        "integer_below_min_value",
        "output_expires_after.seconds",
    ),
    Refused("a string for an array", _create({"requests": "abc"}), "invalid_type", "requests", "an array"),
    Refused("an object for an array", _create({"requests": {"body": {}}}), "invalid_type", "requests"),
    Refused(
        "a typo",
        _create({"metdata": {"a": "b"}}),
        "unknown_parameter",
        "metdata",
        "Unknown parameter: 'metdata'.",
    ),
    Refused(
        "an unknown nested key",
        _create({"output_expires_after": {"anchor": "created_at", "sconds": 1}}),
        "unknown_parameter",
        "output_expires_after.sconds",
    ),
    Refused("the body field itself", _create({"http_body": {}}), "unknown_parameter", "http_body"),
    Refused("a camelCase name", _create({"inputFileId": "file-1"}), "unknown_parameter", "inputFileId"),
    Refused(
        "a path parameter in the body",
        batches_pb2.CancelBatchRequest(batch_id="batch_1", http_body=_body({"batch_id": "batch_2"})),
        "unknown_parameter",
        "batch_id",
    ),
    Refused(
        "an array body", _create([1, 2]), "invalid_type", None, "must be a JSON object, but got an array"
    ),
    Refused("a string body", _create("x"), "invalid_type", None),
    Refused("a null body", _create(None), "invalid_type", None, "got null"),
    Refused("not JSON", _create(b"{oops"), "invalid_json", None),
    Refused(
        "invalid UTF-8", _create(b'{"endpoint": "\xff"}'), "invalid_json", None, "not valid UTF-8 at byte 14"
    ),
    Refused("a byte order mark", _create(b"\xef\xbb\xbf{}"), "invalid_json", None, "byte order mark"),
    Refused("NaN", _create(b'{"priority": NaN}'), "invalid_json", None),
    Refused(
        "a nesting bomb", _create(b'{"priority": ' + b"[" * 5000 + b"]" * 5000 + b"}"), "invalid_json", None
    ),
    Refused(
        "form-encoded", _create(b"a=b", "application/x-www-form-urlencoded"), "invalid_content_type", None
    ),
    Refused("JSON sent as text", _create({}, "text/plain"), "invalid_content_type", None),
    Refused(
        "JSON sent without a Content-Type",
        _create({}, ""),
        "invalid_content_type",
        None,
        "sent without a Content-Type",
    ),
    Refused(  # within orjson's 1,024 levels, past what protobuf's Struct walks in Python: a 500
        "a nesting bomb orjson reads",
        _create(b'{"priority": ' + b"[" * 1000 + b"]" * 1000 + b"}"),
        "invalid_json",
        None,
        "nested too deeply",
    ),
    Refused(
        "a huge unknown key",
        _create({"k" * 100_000: 1}),
        "unknown_parameter",
        "k" * 253 + "...",
    ),
]


@pytest.mark.parametrize("case", REFUSED, ids=lambda c: c.name)
def test_bad_bodies_get_openai_errors(case: Refused) -> None:
    with pytest.raises(ApiError) as caught:
        rest_input.decode_body(case.request)
    error = caught.value
    assert (error.status, error.error_type, error.code, error.param) == (
        400,
        "invalid_request_error",
        case.code,
        case.param,
    )
    assert case.message in error.message
    assert len(error.message.encode()) <= 1024


def test_a_body_becomes_the_typed_request() -> None:
    request, kept = rest_input.decode_body(
        _create(
            {
                "input_file_id": "file-1",
                "endpoint": "/v1/chat/completions",
                "completion_window": "24h",
                "metadata": {"a": "b"},
                "output_expires_after": {"anchor": "created_at", "seconds": 3600.0},
                "priority": "expedited",
                "webhook_url": None,  # null: not given
            }
        )
    )
    assert not kept and not request.HasField("http_body")
    assert json_format.MessageToDict(request, preserving_proto_field_name=True) == {
        "input_file_id": "file-1",
        "endpoint": "/v1/chat/completions",
        "completion_window": "24h",
        "metadata": {"a": "b"},
        "output_expires_after": {"anchor": "created_at", "seconds": 3600},
        "priority": "expedited",
    }


def test_an_empty_object_or_array_is_a_value_given() -> None:
    """`{}` and `[]` had read as not given: `"priority": {}` made a standard batch, and an empty
    `output_expires_after` skipped its checks."""
    for empty in ({}, []):
        request, _ = rest_input.decode_body(_create({"priority": empty}))
        assert request.HasField("priority")
        assert request.priority.WhichOneof("kind") == ("struct_value" if empty == {} else "list_value")
    request, _ = rest_input.decode_body(_create({"output_expires_after": {}}))
    assert request.HasField("output_expires_after")


def test_kept_fields_come_back_as_json_and_stay_out_of_the_message() -> None:
    records = [{"body": {"model": "m", "seed": 2**60}}, None, "x"]
    request, kept = rest_input.decode_body(
        _create({"endpoint": "/v1/embeddings", "requests": records}), keep_json=("requests",)
    )
    assert kept == {"requests": records}  # exactly as sent: no double rounding of 2**60
    assert request.endpoint == "/v1/embeddings" and not request.requests


def test_path_parameters_stay_and_an_empty_body_is_an_empty_object() -> None:
    request, _ = rest_input.decode_body(
        batches_pb2.CancelBatchRequest(batch_id="batch_1", http_body=_body(b"", ""))
    )
    assert request == batches_pb2.CancelBatchRequest(batch_id="batch_1")
    request, _ = rest_input.decode_body(
        batches_pb2.UpdateBatchMetadataRequest(
            batch_id="batch_1", http_body=_body({"metadata": {"k": "v"}}, "application/json; charset=utf-8")
        )
    )
    assert (request.batch_id, dict(request.metadata)) == ("batch_1", {"k": "v"})


def test_native_grpc_requests_pass_unchanged() -> None:
    native = batches_pb2.CreateBatchRequest(endpoint="/v1/embeddings", metadata={"a": "b"})
    assert rest_input.decode_body(native, keep_json=("requests",)) == (native, {})


@dataclass(frozen=True)
class Query:
    name: str
    request: Message
    query: str
    expected: dict[str, Any] = field(default_factory=dict)
    code: str | None = None


QUERIES = [
    Query(
        "a limit", batches_pb2.ListBatchesRequest(), "limit=5&after=batch_1", {"limit": 5, "after": "batch_1"}
    ),
    Query("limit=0 is present", batches_pb2.ListBatchesRequest(), "limit=0", {"limit": 0}),
    Query("the last value wins", batches_pb2.ListBatchesRequest(), "limit=5&limit=7", {"limit": 7}),
    Query("unknown names are ignored", batches_pb2.ListBatchesRequest(), "limt=5&=x&x", {}),
    Query(
        "percent-decoding, + a space",
        files_pb2.ListFilesRequest(),
        "purpose=a%20b+c%2B",
        {"purpose": "a b c+"},
    ),
    Query(
        "booleans",
        results_pb2.GetBatchResultsRequest(batch_id="b"),
        "partial=true",
        {"batch_id": "b", "partial": True},
    ),
    Query(
        "path parameters win",
        results_pb2.GetBatchResultsRequest(batch_id="b"),
        "batch_id=other&partial=0",
        {"batch_id": "b"},
    ),
    Query(
        "repeated fields take every value",
        results_pb2.GetUsageRequest(),
        "group_by=model&group_by=batch_id",
        {"group_by": ["model", "batch_id"]},
    ),
    Query("a word for an integer", batches_pb2.ListBatchesRequest(), "limit=abc", code="invalid_type"),
    Query("an empty integer", batches_pb2.ListBatchesRequest(), "limit=", code="invalid_type"),
    Query("a fraction for an integer", batches_pb2.ListBatchesRequest(), "limit=1.5", code="invalid_type"),
    Query("two minus signs", batches_pb2.ListBatchesRequest(), "limit=--5", code="invalid_type"),
    Query(
        "beyond int32", batches_pb2.ListBatchesRequest(), "limit=99999999999", code="integer_above_max_value"
    ),
    Query(
        "negative for uint32", results_pb2.GetUsageRequest(), "start_time=-1", code="integer_below_min_value"
    ),
    Query("a word for a boolean", results_pb2.GetBatchResultsRequest(), "partial=maybe", code="invalid_type"),
    Query("bytes that are not UTF-8", results_pb2.GetUsageRequest(), "model=%ff", code="invalid_value"),
    Query("a cursor not in UTF-8", batches_pb2.ListBatchesRequest(), "after=batch_%C3", code="invalid_value"),
    Query(
        "UTF-8 in a value",
        results_pb2.GetUsageRequest(),
        "model=%C3%A9t%C3%A9",
        {"model": "\u00e9t\u00e9"},
    ),
]


@pytest.mark.parametrize("case", QUERIES, ids=lambda c: c.name)
def test_query_strings(case: Query) -> None:
    request = type(case.request)()
    request.CopyFrom(case.request)
    if case.code is None:
        rest_input.apply_query(request, case.query)
        assert json_format.MessageToDict(request, preserving_proto_field_name=True) == case.expected
        return
    with pytest.raises(ApiError) as caught:
        rest_input.apply_query(request, case.query)
    param = case.query.partition("=")[0]
    assert (caught.value.status, caught.value.code, caught.value.param) == (400, case.code, param)


def _public_methods() -> list[tuple[Any, Any]]:
    """(method descriptor, its google.api.http rule) for every public RPC."""
    for module in pkgutil.iter_modules(batchgate.v1.__path__):  # every public proto in the pool
        importlib.import_module(f"batchgate.v1.{module.name}")
    pool = descriptor_pool.Default()
    found = [pool.FindMethodByName(f"{m.service}.{m.name}") for m in public_methods()]
    return [(method, method.GetOptions().Extensions[annotations_pb2.http]) for method in found]


DECODED = [m for m, _ in _public_methods() if m.input_type.full_name != "google.api.HttpBody"]


@pytest.mark.parametrize("method", DECODED, ids=lambda m: m.name)
def test_every_public_request_has_types_the_decoder_handles(method: Any) -> None:
    rest_input.check_supported(method.input_type)


def test_every_json_body_is_bound_to_http_body() -> None:
    """Envoy must never transcode a JSON body itself: each route with a body binds it raw."""
    for method, rule in _public_methods():
        has_field = rest_input.BODY_FIELD in method.input_type.fields_by_name
        if method.input_type.full_name == "google.api.HttpBody":  # uploads: the whole body, raw
            assert rule.body == "*"
            continue
        assert (rule.body == rest_input.BODY_FIELD) == bool(rule.body), method.full_name
        assert has_field == bool(rule.body), method.full_name
