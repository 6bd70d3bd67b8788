"""An adversarial corpus of malformed requests to every public REST route, through Envoy.

Each case asserts what a client sees — a 4xx in OpenAI's envelope with the expected `code` and
`param`, JSON content type, no internal words (gRPC, proto, tracebacks) — and, reading the
database, that nothing was stored: no batch, file, Idempotency-Key or loose blob, and the
target batch's metadata unchanged. The openai SDK gets the same answers for what it can send.
"""

from __future__ import annotations

import gzip
import re
import socket
import string
from dataclasses import dataclass
from typing import Any

import httpx
import openai
import orjson
import pytest
from google.api import annotations_pb2
from google.protobuf import descriptor_pb2

from batchgate.gateway.render import DESCRIPTOR_SET
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
    Bad(
        "batches: unknown after",
        "GET",
        "/batches?after=batch_01zzzzzzzzzzzzzzzzzzzzzzzz",
        None,
        "invalid_after",
        "after",
    ),
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


def test_head_answers_as_get_without_a_body(shared_stack: RunningStack) -> None:
    """HEAD on a GET route was 404 `unknown_url`: no route took the method. It is the GET's
    status and headers, without the body, for a found resource and for a missing one."""
    key = shared_stack.keys["default"]
    client = shared_stack.client()
    file = client.files.create(file=("head.jsonl", LINE.encode()), purpose="batch")
    headers = {"Authorization": f"Bearer {key}"}
    base = shared_stack.base_url
    for path, status in (
        ("/models", 200),
        ("/batches?limit=1", 200),
        (f"/files/{file.id}", 200),
        (f"/files/{file.id}/content", 200),
        ("/files/file-missing", 404),
        ("/batchez", 404),
    ):
        got = httpx.get(base + path, headers=headers, timeout=30)
        head = httpx.head(base + path, headers=headers, timeout=30)
        assert (head.status_code, head.content) == (status, b""), path
        assert got.status_code == status, path
        for header in ("content-type", "content-length"):
            assert head.headers.get(header) == got.headers.get(header), (path, header)


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
