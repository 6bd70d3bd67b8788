"""An adversarial corpus of malformed requests to every public REST route, through Envoy.

Each case asserts what a client sees — a 4xx in OpenAI's envelope with the expected `code` and
`param`, JSON content type, no internal words (gRPC, proto, tracebacks) — and, reading the
database, that nothing was stored: no batch, file, Idempotency-Key or loose blob, and the
target batch's metadata unchanged. The openai SDK gets the same answers for what it can send.
"""

from __future__ import annotations

import contextlib
import gzip
import re
import socket
import string
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import openai
import orjson
import pytest
from google.api import annotations_pb2
from google.protobuf import descriptor_pb2

from batchgate.gateway.render import DESCRIPTOR_SET, max_json_body_bytes
from tests.e2e.ingest_client import footprint
from tests.support import RunningStack, add_project, wait_for_batch
from tools.config_docs import README as README_PATH

README = README_PATH.read_text()
PROJECT = "corpus"
ENDPOINT = "/v1/chat/completions"
INTERNAL_WORDS = ("grpc", "proto", "traceback", "exception", "wire format", "upstream")
RECORD = {"body": {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}}
VALID = {"endpoint": ENDPOINT, "completion_window": "24h", "requests": [RECORD]}
BOUNDARY = "corpus-boundary"
MULTIPART = f"multipart/form-data; boundary={BOUNDARY}"


def multipart(*parts: tuple[str, str]) -> bytes:
    """A multipart body of (name, value) parts; the part named `file` carries a filename."""
    out = b""
    for name, value in parts:
        filename = '; filename="in.jsonl"' if name == "file" else ""
        out += (
            f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="{name}"{filename}\r\n\r\n{value}\r\n'
        ).encode()
    return out + f"--{BOUNDARY}--\r\n".encode()


LINE = orjson.dumps({"custom_id": "a", "method": "POST", "url": ENDPOINT, **RECORD}).decode() + "\n"


@dataclass(frozen=True)
class Bad:
    name: str
    method: str
    path: str
    """Under /v1; `{batch}` is the corpus project's batch."""
    body: Any
    """bytes as they are, anything else as JSON, None for no body."""
    code: str
    param: str | None
    status: int = 400
    content_type: str = "application/json"

    def content(self) -> bytes | None:
        if self.body is None or isinstance(self.body, bytes):
            return self.body
        return orjson.dumps(self.body)


def _create(name: str, body: Any, code: str, param: str | None, **kw: Any) -> Bad:
    return Bad(name, "POST", "/batches", body, code, param, **kw)


CORPUS = [
    # --- POST /v1/batches: wrong types, named by their path
    _create(
        "object as a metadata value", {**VALID, "metadata": {"k": {"n": 1}}}, "invalid_type", "metadata.k"
    ),
    _create("list as metadata", {**VALID, "metadata": [{"value": 1}]}, "invalid_type", "metadata"),
    # --- values out of range, named by their path too
    _create(
        "metadata value of 513", {**VALID, "metadata": {"k": "v" * 513}}, "invalid_metadata", "metadata.k"
    ),
    _create(
        "output kept a minute",
        {**VALID, "output_expires_after": {"anchor": "created_at", "seconds": 60}},
        "invalid_output_expires_after",
        "output_expires_after.seconds",
    ),
    _create(
        "output expiry anchor",
        {**VALID, "output_expires_after": {"anchor": "last_active_at", "seconds": 3600}},
        "invalid_output_expires_after",
        "output_expires_after.anchor",
    ),
    _create("number as a metadata value", {**VALID, "metadata": {"k": 1}}, "invalid_type", "metadata.k"),
    _create("null as a metadata value", {**VALID, "metadata": {"k": None}}, "invalid_type", "metadata.k"),
    _create("string as metadata", {**VALID, "metadata": "k=v"}, "invalid_type", "metadata"),
    _create("object as endpoint", {**VALID, "endpoint": {"a": 1}}, "invalid_type", "endpoint"),
    _create("number as endpoint", {**VALID, "endpoint": 5}, "invalid_type", "endpoint"),
    _create("list as endpoint", {**VALID, "endpoint": [ENDPOINT]}, "invalid_type", "endpoint"),
    _create(
        "number as completion_window", {**VALID, "completion_window": 24}, "invalid_type", "completion_window"
    ),
    _create("object as input_file_id", {"input_file_id": {"id": "f"}}, "invalid_type", "input_file_id"),
    _create("boolean as webhook_url", {**VALID, "webhook_url": True}, "invalid_type", "webhook_url"),
    _create(
        "string as output_expires_after",
        {**VALID, "output_expires_after": "1h"},
        "invalid_type",
        "output_expires_after",
    ),
    _create(
        "string as seconds",
        {**VALID, "output_expires_after": {"anchor": "created_at", "seconds": "3600"}},
        "invalid_type",
        "output_expires_after.seconds",
    ),
    _create(
        "fraction as seconds",
        {**VALID, "output_expires_after": {"anchor": "created_at", "seconds": 3600.5}},
        "invalid_type",
        "output_expires_after.seconds",
    ),
    _create(
        "seconds beyond int32",
        {**VALID, "output_expires_after": {"anchor": "created_at", "seconds": 1e20}},
        "integer_above_max_value",
        "output_expires_after.seconds",
    ),
    _create(
        "object as anchor",
        {**VALID, "output_expires_after": {"anchor": {"x": 1}, "seconds": 3600}},
        "invalid_type",
        "output_expires_after.anchor",
    ),
    _create("string as requests", {**VALID, "requests": "abc"}, "invalid_type", "requests"),
    _create("object as requests", {**VALID, "requests": RECORD}, "invalid_type", "requests"),
    _create("object as priority", {**VALID, "priority": {"tier": 1}}, "invalid_priority", "priority"),
    # --- unknown parameters
    _create("a metadata typo", {**VALID, "metdata": {"a": "b"}}, "unknown_parameter", "metdata"),
    _create("camelCase", {**VALID, "completionWindow": "24h"}, "unknown_parameter", "completionWindow"),
    _create(
        "unknown nested key",
        {**VALID, "output_expires_after": {"anchor": "created_at", "seconds": 3600, "unit": "s"}},
        "unknown_parameter",
        "output_expires_after.unit",
    ),
    _create("the http_body field", {**VALID, "http_body": {"data": ""}}, "unknown_parameter", "http_body"),
    _create("non-ASCII key", {**VALID, "métadata": {}}, "unknown_parameter", "métadata"),
    _create("100 kB key", {**VALID, "k" * 100_000: 1}, "unknown_parameter", "k" * 253 + "..."),
    # --- bodies that are not a JSON object
    _create("array body", [VALID], "invalid_type", None),
    _create("string body", "batch", "invalid_type", None),
    _create("number body", 5, "invalid_type", None),
    _create("null body", b"null", "invalid_type", None),
    _create("truncated JSON", b'{"endpoint": ', "invalid_json", None),
    _create("invalid UTF-8", b'{"endpoint": "\xff\xfe"}', "invalid_json", None),
    _create("NaN", b'{"priority": NaN}', "invalid_json", None),
    _create("nesting bomb", b'{"priority": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "invalid_json", None),
    _create("5 MiB of garbage", bytes(range(256)) * 20_480, "invalid_json", None),
    _create("empty body", None, "invalid_endpoint", "endpoint"),
    _create(
        "form-encoded",
        b"endpoint=x",
        "invalid_content_type",
        None,
        content_type="application/x-www-form-urlencoded",
    ),
    _create("JSON as text/plain", VALID, "invalid_content_type", None, content_type="text/plain"),
    # --- values the transcoder used to pass on, now checked by the service
    _create("100 kB endpoint", {**VALID, "endpoint": "e" * 100_000}, "invalid_endpoint", "endpoint"),
    _create(
        "NUL in input_file_id",
        {"input_file_id": "file-\u0000", "endpoint": ENDPOINT, "completion_window": "24h"},
        "not_found",
        "input_file_id",
        status=404,
    ),
    # --- records inside inline requests are free JSON: each is rejected alone (no_valid_records)
    _create(
        "number as a record's custom_id",
        {**VALID, "requests": [{"custom_id": 5, **RECORD}]},
        "no_valid_records",
        "requests",
    ),
    _create(
        "string as a record's body", {**VALID, "requests": [{"body": "hi"}]}, "no_valid_records", "requests"
    ),
    _create("null as a record", {**VALID, "requests": [None]}, "no_valid_records", "requests"),
    # --- cancel and metadata of a batch
    Bad(
        "cancel: unknown key",
        "POST",
        "/batches/{batch}/cancel",
        {"force": True},
        "unknown_parameter",
        "force",
    ),
    Bad(
        "cancel: batch_id in the body",
        "POST",
        "/batches/{batch}/cancel",
        {"batch_id": "x"},
        "unknown_parameter",
        "batch_id",
    ),
    Bad("cancel: array body", "POST", "/batches/{batch}/cancel", [], "invalid_type", None),
    Bad("cancel: not JSON", "POST", "/batches/{batch}/cancel", b"{", "invalid_json", None),
    Bad(
        "metadata: number value",
        "POST",
        "/batches/{batch}/metadata",
        {"metadata": {"k": 1}},
        "invalid_type",
        "metadata.k",
    ),
    Bad(
        "metadata: list", "POST", "/batches/{batch}/metadata", {"metadata": ["k"]}, "invalid_type", "metadata"
    ),
    Bad(
        "metadata: typo",
        "POST",
        "/batches/{batch}/metadata",
        {"metdata": {"k": "v"}},
        "unknown_parameter",
        "metdata",
    ),
    Bad(
        "metadata: extra key",
        "POST",
        "/batches/{batch}/metadata",
        {"metadata": {}, "x": 1},
        "unknown_parameter",
        "x",
    ),
    Bad(
        "metadata: text/plain",
        "POST",
        "/batches/{batch}/metadata",
        {"metadata": {}},
        "invalid_content_type",
        None,
        content_type="text/plain",
    ),
    Bad(
        "metadata: 17 pairs",
        "POST",
        "/batches/{batch}/metadata",
        {"metadata": {f"k{i}": "v" for i in range(17)}},
        "invalid_metadata",
        "metadata",
    ),
    # --- query strings
    Bad("batches: limit=0", "GET", "/batches?limit=0", None, "invalid_limit", "limit"),
    Bad("batches: limit=101", "GET", "/batches?limit=101", None, "invalid_limit", "limit"),
    Bad("batches: limit=abc", "GET", "/batches?limit=abc", None, "invalid_type", "limit"),
    Bad("batches: limit=", "GET", "/batches?limit=", None, "invalid_type", "limit"),
    Bad("batches: limit=1.5", "GET", "/batches?limit=1.5", None, "invalid_type", "limit"),
    Bad("batches: huge limit", "GET", "/batches?limit=99999999999", None, "integer_above_max_value", "limit"),
    Bad("batches: a malformed after", "GET", "/batches?after=batch_01zz", None, "invalid_after", "after"),
    Bad("batches: a file id as after", "GET", "/batches?after=file-x", None, "invalid_after", "after"),
    Bad("files: limit=0", "GET", "/files?limit=0", None, "invalid_limit", "limit"),
    Bad("files: limit=10001", "GET", "/files?limit=10001", None, "invalid_limit", "limit"),
    Bad("files: unknown after", "GET", "/files?after=file-nope", None, "invalid_after", "after"),
    Bad("files: order", "GET", "/files?order=sideways", None, "invalid_order", "order"),
    Bad("files: purpose", "GET", "/files?purpose=batches", None, "invalid_purpose", "purpose"),
    Bad("usage events: limit=0", "GET", "/usage/events?limit=0", None, "invalid_limit", "limit"),
    Bad("usage events: limit=x", "GET", "/usage/events?limit=x", None, "invalid_type", "limit"),
    Bad(
        "usage events: unknown after",
        "GET",
        "/usage/events?after=usage_999999999",
        None,
        "invalid_after",
        "after",
    ),
    Bad("usage events: malformed after", "GET", "/usage/events?after=nope", None, "invalid_after", "after"),
    Bad("usage: start_time=abc", "GET", "/usage?start_time=abc", None, "invalid_type", "start_time"),
    Bad("usage: start_time=-1", "GET", "/usage?start_time=-1", None, "integer_below_min_value", "start_time"),
    Bad(
        "usage: time range", "GET", "/usage?start_time=10&end_time=5", None, "invalid_time_range", "end_time"
    ),
    Bad("usage: group_by", "GET", "/usage?group_by=colour", None, "invalid_group_by", "group_by"),
    Bad("usage: NUL model", "GET", "/usage?model=%00", None, "invalid_value", "model"),
    Bad(
        "results: partial=maybe",
        "GET",
        "/batches/{batch}/results?partial=maybe",
        None,
        "invalid_type",
        "partial",
    ),
    Bad("results: state", "GET", "/batches/{batch}/results?state=done", None, "invalid_state", "state"),
    # --- bodies where none is read, unknown routes
    Bad("GET with a body", "GET", "/batches", {"limit": 1}, "body_not_allowed", None),
    Bad("DELETE with a body", "DELETE", "/files/file-x", {"force": True}, "body_not_allowed", None),
    Bad("unknown route", "GET", "/batchez", None, "unknown_url", None, status=404),
    Bad("wrong method", "PUT", "/batches/{batch}", {}, "unknown_url", None, status=404),
    # --- uploads: form fields
    Bad("upload: JSON", "POST", "/files", {"purpose": "batch"}, "invalid_content_type", None),
    Bad(
        "upload: unknown field",
        "POST",
        "/files",
        multipart(("purpse", "batch"), ("file", LINE)),
        "unknown_parameter",
        "purpse",
        content_type=MULTIPART,
    ),
    Bad(
        "upload: field after the file",
        "POST",
        "/files",
        multipart(("purpose", "batch"), ("file", LINE), ("x", "1")),
        "unknown_parameter",
        "x",
        content_type=MULTIPART,
    ),
    Bad(
        "upload: purpose",
        "POST",
        "/files",
        multipart(("purpose", "fine-tune"), ("file", LINE)),
        "invalid_purpose",
        "purpose",
        content_type=MULTIPART,
    ),
    Bad(
        "upload: expiry seconds",
        "POST",
        "/files",
        multipart(
            ("purpose", "batch"),
            ("expires_after[anchor]", "created_at"),
            ("expires_after[seconds]", "soon"),
            ("file", LINE),
        ),
        "invalid_expires_after",
        "expires_after[seconds]",
        content_type=MULTIPART,
    ),
    Bad(
        "upload: no file part",
        "POST",
        "/files",
        multipart(("purpose", "batch")),
        "missing_file",
        "file",
        content_type=MULTIPART,
    ),
    Bad(
        "upload: garbage",
        "POST",
        "/files",
        b"not multipart at all",
        "invalid_multipart",
        None,
        content_type=MULTIPART,
    ),
]


@dataclass(frozen=True)
class Corpus:
    project_id: str
    batch: str


@pytest.fixture(scope="module")
def corpus(shared_stack: RunningStack) -> Corpus:
    project_id = add_project(shared_stack, PROJECT)
    client = shared_stack.client(PROJECT)
    batch = client.batches.create(
        input_file_id="", endpoint=ENDPOINT, completion_window="24h", extra_body={"requests": [RECORD]}
    )
    wait_for_batch(client, batch.id)
    client.post(f"/batches/{batch.id}/metadata", body={"metadata": {"kept": "yes"}}, cast_to=httpx.Response)
    return Corpus(project_id, batch.id)


def _state(stack: RunningStack, corpus: Corpus) -> tuple[dict[str, int], Any]:
    batch = stack.client(PROJECT).batches.retrieve(corpus.batch)
    return footprint(stack, corpus.project_id), (batch.status, batch.metadata)


def _assert_clean_error(answer: httpx.Response, status: int, code: str, param: str | None) -> dict[str, Any]:
    assert answer.headers["content-type"].startswith("application/json")
    error = answer.json()["error"]
    assert (answer.status_code, error["code"], error["param"]) == (status, code, param), answer.text[:2000]
    assert error["type"] == "invalid_request_error" and error["message"]
    assert len(error["message"].encode()) <= 1024
    text = answer.text.lower()
    assert not [word for word in INTERNAL_WORDS if word in text], answer.text[:2000]
    assert f"`{code}`" in README, f"README's error code table lacks {code}"
    return dict(error)


@pytest.mark.parametrize("case", CORPUS, ids=lambda c: c.name)
def test_a_malformed_request_is_a_clean_4xx_that_stores_nothing(
    shared_stack: RunningStack, corpus: Corpus, case: Bad
) -> None:
    before = _state(shared_stack, corpus)
    headers = {
        "Authorization": f"Bearer {shared_stack.keys[PROJECT]}",
        "Idempotency-Key": f"corpus {case.name}",
    }
    if case.content() is not None:
        headers["Content-Type"] = case.content_type
    answer = httpx.request(
        case.method,
        shared_stack.base_url + case.path.format(batch=corpus.batch),
        content=case.content(),
        headers=headers,
        timeout=60,
    )
    _assert_clean_error(answer, case.status, case.code, case.param)
    after = _state(shared_stack, corpus)
    if case.code == "no_valid_records":  # the one thing it stores: the rejections file it names
        assert after == ({**before[0], "files": before[0]["files"] + 1}, before[1])
    else:
        assert after == before


def _sdk_error(call: Any) -> openai.APIStatusError:
    with pytest.raises(openai.APIStatusError) as caught:
        call()
    return caught.value


def test_the_openai_sdk_gets_the_same_answers(shared_stack: RunningStack, corpus: Corpus) -> None:
    client = shared_stack.client(PROJECT)
    create = {"input_file_id": "", "endpoint": ENDPOINT, "completion_window": "24h"}
    calls = [
        (
            lambda: client.batches.create(**create, extra_body={"metdata": {"a": "b"}, "requests": [RECORD]}),
            "unknown_parameter",
            "metdata",
        ),
        (
            lambda: client.batches.create(
                **create, metadata={"k": {"n": 1}}, extra_body={"requests": [RECORD]}
            ),
            "invalid_type",
            "metadata.k",
        ),
        (lambda: client.batches.create(**create, extra_body={"requests": "abc"}), "invalid_type", "requests"),
        (lambda: client.batches.list(limit=0), "invalid_limit", "limit"),
        (lambda: client.batches.list(after="batch_nope"), "invalid_after", "after"),
        (lambda: client.files.list(limit=0), "invalid_limit", "limit"),
        (lambda: client.files.list(after="file-nope"), "invalid_after", "after"),
    ]
    before = _state(shared_stack, corpus)
    for call, code, param in calls:
        error = _sdk_error(call)
        assert isinstance(error, openai.BadRequestError)
        assert (error.code, error.param, error.type) == (code, param, "invalid_request_error")
    assert _state(shared_stack, corpus) == before


def test_paging_with_after_still_walks_every_page(shared_stack: RunningStack, corpus: Corpus) -> None:
    client = shared_stack.client(PROJECT)
    listed = [f.id for f in client.files.list(limit=1)]  # the SDK pages with after=<last id>
    assert len(listed) == len(set(listed)) >= 2
    assert [f.id for f in client.files.list(limit=1, after=listed[0]).data] == listed[1:2]


def test_a_list_and_delete_loop_walks_every_page(shared_stack: RunningStack) -> None:
    """The SDK pages with after=<the last id of the page before>; deleting each file while
    iterating made that cursor unknown, and the second page a 400 `invalid_after`."""
    project = f"delete-loop-{uuid.uuid4().hex[:6]}"
    add_project(shared_stack, project)
    client = shared_stack.client(project)
    made = {client.files.create(file=(f"f{i}.jsonl", LINE.encode()), purpose="batch").id for i in range(5)}
    deleted = set()
    for file in client.files.list(limit=2):
        client.files.delete(file.id)
        deleted.add(file.id)
    assert deleted == made and client.files.list().data == []
    # Another project's id only marks a place in time: the page holds the caller's files alone.
    older = client.files.create(file=("older.jsonl", LINE.encode()), purpose="batch").id
    foreign = shared_stack.client().files.create(file=("theirs.jsonl", LINE.encode()), purpose="batch").id
    client.files.create(file=("newer.jsonl", LINE.encode()), purpose="batch")
    assert [f.id for f in client.files.list(after=foreign).data] == [older]


def _routes_with_an_id() -> list[tuple[str, str, str]]:
    """(HTTP method, path template, its id field) of every public route with an id in its path."""
    found = []
    for file in descriptor_pb2.FileDescriptorSet.FromString(DESCRIPTOR_SET.read_bytes()).file:
        for service in file.service:
            for method in service.method:
                http = method.options.Extensions[annotations_pb2.http]
                verb = http.WhichOneof("pattern")
                if verb in ("get", "post", "delete", "put", "patch"):
                    template = getattr(http, verb)
                    found += [(verb.upper(), template, name) for name in re.findall(r"\{(\w+)\}", template)]
    return found


@pytest.mark.parametrize(("method", "template", "field"), _routes_with_an_id(), ids=lambda v: str(v))
def test_an_id_that_is_not_utf8_is_a_clean_400_in_the_routes_envelope(
    shared_stack: RunningStack, method: str, template: str, field: str
) -> None:
    """`%ff` in a path id reached the service as a string field of invalid UTF-8, which gRPC
    failed to decode before any handler ran: a 500 naming Python's DecodeError."""
    path = template.replace(f"{{{field}}}", "%ff")
    headers = {"Authorization": f"Bearer {shared_stack.key}"}
    body = None if method in ("GET", "DELETE") else b"{}"
    if body is not None:
        headers["Content-Type"] = "application/json"
    answer = httpx.request(
        method,
        f"http://127.0.0.1:{shared_stack.settings.port}{path}",
        content=body,
        headers=headers,
        timeout=30,
    )
    if path.startswith("/v1/messages/"):  # Anthropic's envelope on the Message Batches routes
        assert answer.status_code == 400, answer.text
        assert answer.json()["type"] == "error"
        error = answer.json()["error"]
        assert error["type"] == "invalid_request_error" and f"'{field}'" in error["message"]
        assert not [word for word in INTERNAL_WORDS if word in answer.text.lower()], answer.text
    else:
        error = _assert_clean_error(answer, 400, "invalid_value", field)
        assert "UTF-8" in error["message"]


@pytest.mark.parametrize(
    ("path", "param"),
    [
        ("/v1/usage?model=%ff", "model"),
        ("/v1/batches?after=batch_%C3", "after"),
        ("/v1/files?purpose=%ff%fe", "purpose"),
    ],
)
def test_a_query_value_that_is_not_utf8_is_invalid_value_as_in_a_path(
    shared_stack: RunningStack, path: str, param: str
) -> None:
    """It was decoded with U+FFFD in place of the bytes: `?model=%ff` answered 200 with nothing,
    `?batch_id=%ff` a 404 quoting the replacement character."""
    answer = httpx.get(
        f"http://127.0.0.1:{shared_stack.settings.port}{path}",
        headers={"Authorization": f"Bearer {shared_stack.key}"},
        timeout=30,
    )
    error = _assert_clean_error(answer, 400, "invalid_value", param)
    assert "UTF-8" in error["message"]


def _raw_http(stack: RunningStack, request: bytes) -> tuple[int, dict[str, Any]]:
    """Send bytes no HTTP client would, and read Envoy's answer: (status, JSON body)."""
    with socket.create_connection(("127.0.0.1", stack.settings.port), timeout=10) as conn:
        conn.sendall(request)
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), orjson.loads(body)


@pytest.mark.parametrize(
    ("request_bytes", "status", "code"),
    [
        (
            b"GET /v1/batches HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 70_000 + b"\r\n\r\n",
            431,
            "request_headers_too_large",
        ),
        (b"GET /v1/ba tches HTTP/1.1\r\nHost: x\r\n\r\n", 400, "invalid_request"),
        (b"GARBAGE\r\n\r\n", 400, "invalid_request"),
    ],
    ids=["headers too large", "a space in the path", "not HTTP"],
)
def test_what_envoy_cannot_read_as_http_gets_the_apis_codes(
    shared_stack: RunningStack, request_bytes: bytes, status: int, code: str
) -> None:
    """These were `"code": "http1.headers_too_large"` / `"http1.codec_error"`: Envoy's own names."""
    answered, body = _raw_http(shared_stack, request_bytes)
    assert answered == status
    assert body["error"]["code"] == code and body["error"]["type"] == "invalid_request_error"
    assert "http1." not in body["error"]["message"]


def _filler(size: int) -> str:
    """`size` characters that HPACK's Huffman code does not shrink much (a run of one letter
    packs to 5 bits a character, under gRPC's limit on a header's encoded length)."""
    alphabet = string.ascii_letters + string.digits
    return (alphabet * (size // len(alphabet) + 1))[:size]


@pytest.mark.parametrize(
    ("path", "headers", "status", "error"),
    [
        ("/v1/batches?limit=1", {"X-Big": _filler(12_000)}, 200, None),  # gRPC refused at random above 8 KiB
        ("/v1/batches?limit=1", {"Cookie": "c=" + _filler(45_000)}, 200, None),
        ("/v1/batches?limit=1&pad=" + _filler(55_000), {}, 200, None),  # the query: three times
        ("/v1/batches/batch_" + _filler(55_000), {}, 404, ("code", "not_found")),  # the path twice
        ("/v1/messages/batches/msgbatch_" + _filler(40_000), {}, 404, ("type", "not_found_error")),
    ],
    ids=["12 kB header", "45 kB cookie", "55 kB query", "55 kB path", "40 kB Anthropic path"],
)
def test_a_request_head_envoy_takes_is_answered(
    shared_stack: RunningStack, path: str, headers: dict[str, str], status: int, error: tuple[str, str] | None
) -> None:
    """Heads above gRPC's metadata defaults were 429 `rate_limit_error` (RESOURCE_EXHAUSTED in
    the transcoder's words, with the internal header names): clients backed off and retried a
    rate limit that was none. What Envoy takes (up to its 60 KiB, 431 beyond) is answered."""
    key = shared_stack.keys["default"]
    answer = httpx.get(
        f"http://127.0.0.1:{shared_stack.settings.port}{path}",
        headers={"Authorization": f"Bearer {key}", **headers},
        timeout=30,
    )
    assert answer.status_code == status, answer.text[:300]
    if error is not None:
        field, value = error
        assert answer.json()["error"][field] == value


def _read_head(conn: socket.socket) -> tuple[bytes, bytes]:
    """Read an answer's head from `conn`: (the head, whatever came after it in the same reads)."""
    data = b""
    while b"\r\n\r\n" not in data and (chunk := conn.recv(65536)):
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    return head, rest


def _head_then_get(stack: RunningStack, path: str, key: str) -> tuple[bytes, bytes, bytes]:
    """A HEAD of `path`, then a GET of it on the same connection, as a client that trusts HEAD to
    have no body does: (the HEAD's head, every byte that followed it, the GET's head)."""
    request = "{} /v1{} HTTP/1.1\r\nHost: gateway\r\nAuthorization: Bearer {}\r\n\r\n"
    with socket.create_connection(("127.0.0.1", stack.settings.port), timeout=10) as conn:
        conn.sendall(request.format("HEAD", path, key).encode())
        head, extra = _read_head(conn)
        conn.settimeout(0.5)  # a body sent after the head is there by now (it was: all of the GET's)
        with contextlib.suppress(TimeoutError):
            while chunk := conn.recv(65536):
                extra += chunk
        conn.settimeout(10)
        conn.sendall(request.format("GET", path, key).encode())
        got, _ = _read_head(conn)
    return head, extra, got


def test_head_answers_as_get_without_a_body(shared_stack: RunningStack) -> None:
    """HEAD on a GET route was 404 `unknown_url`: no route took the method. It is the GET's
    status and headers, without the body, for a found resource and for a missing one. Without
    it on the wire too: the GET's body had followed the HEAD's head (httpx's `head` reads none),
    and the next answer on the connection was read from its middle ("illegal status line")."""
    key = shared_stack.keys["default"]
    client = shared_stack.client()
    file = client.files.create(file=("head.jsonl", LINE.encode()), purpose="batch")
    headers = {"Authorization": f"Bearer {key}"}
    with httpx.Client(base_url=shared_stack.base_url, headers=headers, timeout=30) as one_connection:
        for path, status in (
            ("/models", 200),
            ("/batches?limit=1", 200),
            (f"/files/{file.id}", 200),
            (f"/files/{file.id}/content", 200),  # chunked: no chunk of it either, nor the last
            ("/files/file-missing", 404),
            ("/messages/batches/msgbatch_missing", 404),
            ("/batchez", 404),
        ):
            head = one_connection.head(path)
            got = one_connection.get(path)  # after the HEAD, on its connection
            assert (head.status_code, head.content) == (status, b""), path
            assert got.status_code == status, path
            for header in ("content-type", "content-length"):
                assert head.headers.get(header) == got.headers.get(header), (path, header)
            raw_head, extra, raw_get = _head_then_get(shared_stack, path, key)
            assert raw_head.startswith(f"HTTP/1.1 {status} ".encode()), (path, raw_head)
            assert extra == b"", (path, extra[:200])
            assert raw_get.startswith(f"HTTP/1.1 {status} ".encode()), (path, raw_get[:200])


def test_a_gzip_body_is_read_and_other_codings_are_refused(shared_stack: RunningStack) -> None:
    """`Content-Encoding: gzip` bodies (a create's JSON, an upload's multipart) are inflated by
    the gateway, however well they compress; they read as broken JSON before. Another coding is
    415, a gzip body that does not inflate a clean 400, one that inflates past the message limit 413;
    none stores anything."""
    headers = {"Authorization": f"Bearer {shared_stack.keys['default']}", "Content-Type": "application/json"}
    base = shared_stack.base_url
    created = httpx.post(
        f"{base}/batches",
        content=gzip.compress(orjson.dumps(VALID)),
        headers={**headers, "Content-Encoding": "gzip"},
        timeout=60,
    )
    assert created.status_code == 200, created.text
    assert created.json()["request_counts"]["total"] == 1
    uploaded = httpx.post(
        f"{base}/files",
        content=gzip.compress(multipart(("purpose", "batch"), ("file", LINE))),
        headers={**headers, "Content-Type": MULTIPART, "Content-Encoding": "gzip"},
        timeout=60,
    )
    assert uploaded.status_code == 200, uploaded.text
    content = httpx.get(f"{base}/files/{uploaded.json()['id']}/content", headers=headers, timeout=30)
    assert content.content == LINE.encode()

    # Past Envoy's default inflate ratio (100, which cut the body silently): read whole.
    padded = httpx.post(
        f"{base}/batches",
        content=gzip.compress(b" " * 4 * 2**20 + orjson.dumps(VALID)),
        headers={**headers, "Content-Encoding": "gzip"},
        timeout=60,
    )
    assert padded.status_code == 200, padded.text

    def batch_ids() -> list[str]:
        listing = httpx.get(f"{base}/batches?limit=100", headers=headers, timeout=30).json()
        return [batch["id"] for batch in listing["data"]]

    listed = batch_ids()
    bomb = gzip.compress(orjson.dumps(VALID) + b" " * 80 * 2**20)  # past the 64 MiB message limit
    for coding, body, status, code in (
        ("gzip", bomb, 413, "request_too_large"),
        ("br", orjson.dumps(VALID), 415, "unsupported_content_encoding"),
        ("gzip", orjson.dumps(VALID), 400, "invalid_content_encoding"),  # not compressed
        ("gzip", b"\x1f\x8b\x08\x00garbage" + orjson.dumps(VALID), 400, "invalid_content_encoding"),
        ("gzip", gzip.compress(orjson.dumps(VALID))[:-60], 400, "invalid_json"),  # cut short
    ):
        refused = httpx.post(
            f"{base}/batches", content=body, headers={**headers, "Content-Encoding": coding}, timeout=30
        )
        assert refused.status_code == status, (coding, refused.text)
        assert refused.json()["error"]["code"] == code, refused.text
    assert batch_ids() == listed

    def file_ids() -> list[str]:
        return [file["id"] for file in httpx.get(f"{base}/files", headers=headers, timeout=30).json()["data"]]

    stored = file_ids()
    form = multipart(("purpose", "batch"), ("file", LINE))
    for body, code in (
        (form, "invalid_content_encoding"),  # not compressed
        (b"\x1f\x8b\x08\x00garbage" + form, "invalid_content_encoding"),
        (gzip.compress(form)[:-40], "invalid_multipart"),  # cut short: the form ends early
    ):
        refused = httpx.post(
            f"{base}/files",
            content=body,
            headers={**headers, "Content-Type": MULTIPART, "Content-Encoding": "gzip"},
            timeout=30,
        )
        assert (refused.status_code, refused.json()["error"]["code"]) == (400, code), refused.text
    assert file_ids() == stored


@pytest.mark.parametrize(
    "content_type",
    [
        "application/grpc-web",
        "application/grpc-web+proto",
        "application/grpcx",
        "application/grpc;charset=utf-8",
        "application/grpc+xml",
    ],
)
def test_a_content_type_that_only_looks_like_grpc_is_rest(
    shared_stack: RunningStack, content_type: str
) -> None:
    """Any type starting `application/grpc` was taken for native gRPC: no body checks, a 400 with
    no body, `content-type: application/grpc` and the internal headers (grpc-status, grpc-message,
    x-oai-status, x-oai-error) in the answer (`+xml`: a 200 with grpc-status 12). Native gRPC is
    `application/grpc`, `+proto` or `+json`; the rest is REST: 400 `invalid_content_type`."""
    headers = {"Authorization": f"Bearer {shared_stack.key}", "Content-Type": content_type}
    base = shared_stack.base_url
    answer = httpx.post(f"{base}/batches", content=b"{}", headers=headers, timeout=30)
    assert answer.headers["content-type"] == "application/json"
    error = answer.json()["error"]
    assert (answer.status_code, error["code"], error["type"]) == (
        400,
        "invalid_content_type",
        "invalid_request_error",
    )
    assert f"'{content_type}'" in error["message"]  # the only "grpc" in it: the type as sent
    assert not [name for name in answer.headers if name.startswith(("grpc-", "x-oai-"))], answer.headers
    anthropic = httpx.post(f"{base}/messages/batches", content=b"{}", headers=headers, timeout=30)
    assert anthropic.status_code == 400, anthropic.text
    assert anthropic.json()["type"] == "error", anthropic.text
    assert anthropic.json()["error"]["type"] == "invalid_request_error"
    assert not [name for name in anthropic.headers if name.startswith(("grpc-", "x-oai-"))]


def test_a_client_cannot_mark_its_request_as_the_gateways_own_reply(shared_stack: RunningStack) -> None:
    """The Lua filter marked its own refusals with a request header, `x-oai-local-reply`, for
    Envoy to pass their bodies through; a client that sent it got Envoy's 404 with no body."""
    answer = httpx.get(
        f"http://127.0.0.1:{shared_stack.settings.port}/v1/nope",
        headers={"x-oai-local-reply": "1"},
        timeout=30,
    )
    _assert_clean_error(answer, 404, "unknown_url", None)


def _chunked(data: bytes) -> Iterator[bytes]:
    """`data` as a body without a Content-Length (httpx sends an iterator chunked)."""
    yield data


def test_a_chunked_body_on_get_head_or_delete_is_refused(shared_stack: RunningStack) -> None:
    """Envoy's HTTP/1 codec drops `Transfer-Encoding`, so a chunked body looked like none: a
    chunked DELETE with a body deleted the file, where one with a Content-Length is 400."""
    client = shared_stack.client()
    file = client.files.create(file=("chunked.jsonl", LINE.encode()), purpose="batch")
    headers = {"Authorization": f"Bearer {shared_stack.key}", "Content-Type": "application/json"}
    for method in ("GET", "HEAD", "DELETE"):
        answer = httpx.request(
            method,
            f"{shared_stack.base_url}/files/{file.id}",
            content=_chunked(b'{"x": 1}'),
            headers=headers,
            timeout=30,
        )
        assert answer.status_code == 400, (method, answer.text)
        if method != "HEAD":
            _assert_clean_error(answer, 400, "body_not_allowed", None)
    assert client.files.retrieve(file.id).id == file.id  # not deleted
    empty = httpx.request(
        "DELETE",
        f"{shared_stack.base_url}/files/{file.id}",
        content=_chunked(b""),
        headers=headers,
        timeout=30,
    )
    assert empty.status_code == 200 and empty.json()["deleted"] is True, empty.text  # no body: runs


def test_a_chunked_gzip_body_that_does_not_inflate_is_refused(shared_stack: RunningStack) -> None:
    """A chunked body marked `Content-Encoding: gzip` that is not gzip inflated to nothing and
    went unmarked (no length to tell a body was there): the call read as one without a body and
    ran (a template paused), where one with a Content-Length is 400 `invalid_content_encoding`."""
    client = shared_stack.client()
    file = client.files.create(file=("template.jsonl", LINE.encode()), purpose="batch")
    headers = {"Authorization": f"Bearer {shared_stack.key}", "Content-Type": "application/json"}
    base = shared_stack.base_url
    scheduled = {
        "input_file_id": file.id,
        "endpoint": ENDPOINT,
        "completion_window": "24h",
        "cron": "0 5 29 2 *",
    }
    created = httpx.post(f"{base}/batches", json=scheduled, headers=headers, timeout=30)
    assert created.status_code == 200, created.text
    template = created.json()["id"]
    try:
        for body in (b"{}", orjson.dumps(VALID)):
            refused = httpx.post(
                f"{base}/batch_templates/{template}/pause",
                content=_chunked(body),
                headers={**headers, "Content-Encoding": "gzip"},
                timeout=30,
            )
            _assert_clean_error(refused, 400, "invalid_content_encoding", None)
        got = httpx.get(f"{base}/batch_templates/{template}", headers=headers, timeout=30)
        assert got.json()["status"] == "scheduled", got.text
        paused = httpx.post(
            f"{base}/batch_templates/{template}/pause",
            content=_chunked(gzip.compress(b"{}")),
            headers={**headers, "Content-Encoding": "gzip"},
            timeout=30,
        )
        assert paused.status_code == 200 and paused.json()["status"] == "paused", paused.text
    finally:
        httpx.delete(f"{base}/batch_templates/{template}", headers=headers, timeout=30)


def test_a_chunked_json_body_past_the_limit_is_413(shared_stack: RunningStack) -> None:
    """The JSON body limit was checked against Content-Length only: a chunked body ran on to the
    transcoder's limit, the larger Message Batches one, and a create past the limit was made."""
    headers = {"Authorization": f"Bearer {shared_stack.key}", "Content-Type": "application/json"}
    base = shared_stack.base_url

    def batch_ids() -> list[str]:
        listing = httpx.get(f"{base}/batches?limit=100", headers=headers, timeout=30).json()
        return [batch["id"] for batch in listing["data"]]

    listed = batch_ids()
    limit = max_json_body_bytes(shared_stack.settings)
    big = orjson.dumps(VALID) + b" " * limit
    refused = httpx.post(
        f"{base}/batches",
        content=(big[i : i + 2**20] for i in range(0, len(big), 2**20)),
        headers=headers,
        timeout=60,
    )
    _assert_clean_error(refused, 413, "request_too_large", None)
    assert str(limit) in refused.json()["error"]["message"]
    assert batch_ids() == listed
    created = httpx.post(
        f"{base}/batches", content=_chunked(orjson.dumps(VALID)), headers=headers, timeout=60
    )
    assert created.status_code == 200, created.text  # under the limit, chunked: read as before


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"GET /v1/messages/batches#top HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        b"POST /v1/messages/batches HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    ],
    ids=["a path Envoy cannot normalize", "a chunk Envoy cannot read"],
)
def test_envoys_own_4xx_on_the_message_batches_routes_are_in_anthropics_envelope(
    shared_stack: RunningStack, request_bytes: bytes
) -> None:
    """Envoy's own 400s there came in OpenAI's envelope. (What it refuses before it has a request
    line and headers, a 431 or a method it cannot parse, has no path to tell the route by.)"""
    answered, body = _raw_http(shared_stack, request_bytes)
    assert answered == 400
    assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error", body


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE", "OPTIONS"])
def test_the_web_panel_answers_get_and_head_only(shared_stack: RunningStack, method: str) -> None:
    """The panel's routes matched the path alone: `POST /ui/` and `DELETE /ui/` were 200 with the
    page. Any method but GET and HEAD is the 404 `unknown_url` of a path without a route."""
    base = f"http://127.0.0.1:{shared_stack.settings.port}"
    if httpx.get(f"{base}/ui/", timeout=30).status_code != 200:
        pytest.skip("the web panel is not installed (npm ci never ran)")
    for path in ("/ui/", "/ui/app.js", "/ui", "/"):
        answer = httpx.request(method, base + path, timeout=30)
        _assert_clean_error(answer, 404, "unknown_url", None)
        assert path in answer.json()["error"]["message"]
    assert httpx.head(f"{base}/ui/app.js", timeout=30).status_code == 200
    assert httpx.get(base + "/", timeout=30).status_code == 301
