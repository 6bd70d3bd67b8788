"""Every bad input to POST /v1/batches, through Envoy with the openai SDK and with raw HTTP.

Each case asserts the HTTP status, the error `code`, the rejected `line` where there is one,
and — reading the database directly — that nothing was stored: no batch, no item, no file,
no Idempotency-Key, no stray blob. A bad *record* is rejected alone (its item is stored in
state `rejected` without a body) and the rest of the batch runs.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from tests.e2e.ingest_client import VIAS, create_batch, footprint, from_file, upload_records
from tests.message_batch_support import params, sdk, wait_ended
from tests.support import RunningStack, add_project, db_rows, jsonl, read_jsonl, wait_for_batch

ENDPOINT = "/v1/chat/completions"
PROJECT = "badinput"


def record(custom_id: str = "bad", **overrides: Any) -> dict[str, Any]:
    line: dict[str, Any] = {
        "custom_id": custom_id,
        "method": "POST",
        "url": ENDPOINT,
        "body": {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": f"hi {custom_id}"}]},
    }
    line.update(overrides)
    return {k: v for k, v in line.items() if v is not ...}


def good(n: int) -> bytes:
    return json.dumps(record(f"good-{n}")).encode()


@dataclass(frozen=True)
class Context:
    """Files the cases refer to (uploaded once per database)."""

    project_id: str
    input_file: str
    other_projects_file: str
    output_file: str


@pytest.fixture(scope="module")
def context(shared_stack: RunningStack) -> Context:
    project_id = add_project(shared_stack, PROJECT)
    input_file = upload_records(shared_stack, [record("a")], PROJECT)
    other = upload_records(shared_stack, [record("a")], "other")
    partly_bad = upload_records(shared_stack, [record("a"), record("b", method="GET")], PROJECT)
    answer = create_batch("http", shared_stack, from_file(partly_bad), PROJECT)
    wait_for_batch(shared_stack.client(PROJECT), answer.body["id"])  # its files are written by now
    return Context(project_id, input_file, other, answer.body["rejected_records_file_id"])


# --- requests refused as a whole --------------------------------------------------------------


@dataclass(frozen=True)
class BadRequest:
    name: str
    status: int
    code: str
    params: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


def _base(**params: Any) -> dict[str, Any]:
    out = {"input_file_id": "{input_file}", "endpoint": ENDPOINT, "completion_window": "24h"}
    out.update(params)
    return {k: v for k, v in out.items() if v is not ...}


BAD_REQUESTS = [
    BadRequest("unsupported endpoint", 400, "invalid_endpoint", _base(endpoint="/v1/images/generations")),
    BadRequest("missing endpoint", 400, "invalid_endpoint", _base(endpoint=...)),
    BadRequest("completion window 48h", 400, "invalid_completion_window", _base(completion_window="48h")),
    BadRequest(
        "17 metadata pairs", 400, "invalid_metadata", _base(metadata={f"k{i}": "v" for i in range(17)})
    ),
    BadRequest("metadata key of 65 chars", 400, "invalid_metadata", _base(metadata={"k" * 65: "v"})),
    BadRequest("metadata value of 513 chars", 400, "invalid_metadata", _base(metadata={"k": "v" * 513})),
    BadRequest("no input at all", 400, "missing_input", _base(input_file_id=...)),
    BadRequest(
        "both a file and inline requests",
        400,
        "missing_input",
        _base(requests=[{"body": {"model": "gpt-4o-mini", "messages": []}}]),
    ),
    BadRequest("unknown priority word", 400, "invalid_priority", _base(priority="urgent")),
    BadRequest("fractional priority", 400, "invalid_priority", _base(priority=1.5)),
    BadRequest(
        "output expiry below an hour",
        400,
        "invalid_output_expires_after",
        _base(output_expires_after={"anchor": "created_at", "seconds": 60}),
    ),
    BadRequest(
        "output expiry with another anchor",
        400,
        "invalid_output_expires_after",
        _base(output_expires_after={"anchor": "completed_at", "seconds": 7200}),
    ),
    BadRequest("unknown input file", 404, "not_found", _base(input_file_id="file-doesnotexist")),
    BadRequest("another project's file", 404, "not_found", _base(input_file_id="{other_projects_file}")),
    BadRequest("an output file as input", 400, "invalid_input_file", _base(input_file_id="{output_file}")),
    BadRequest(
        "Idempotency-Key over 512 bytes",
        400,
        "invalid_idempotency_key",
        _base(),
        {"Idempotency-Key": "k" * 513},
    ),
]


def _fill(value: Any, context: Context) -> Any:
    if isinstance(value, str) and value.startswith("{") and value.endswith("}"):
        return getattr(context, value[1:-1])
    return value


@pytest.mark.parametrize("via", VIAS)
@pytest.mark.parametrize("case", BAD_REQUESTS, ids=lambda c: c.name)
def test_bad_request_is_refused_and_stores_nothing(
    shared_stack: RunningStack, context: Context, case: BadRequest, via: str
) -> None:
    params = {k: _fill(v, context) for k, v in case.params.items()}
    before = footprint(shared_stack, context.project_id)
    answer = create_batch(via, shared_stack, params, PROJECT, case.headers)
    answer.expect_error(case.status, case.code)
    assert footprint(shared_stack, context.project_id) == before


# --- input files whose every record (or whose whole content) is unusable -------------------


@pytest.mark.parametrize("via", VIAS)
def test_no_valid_records_is_400_with_every_rejection_and_no_batch(
    shared_stack: RunningStack, context: Context, via: str
) -> None:
    lines = [b"{oops", b"", json.dumps(record("x", method="GET")).encode(), b"[1]"]
    input_file = upload_records(shared_stack, b"\n".join(lines) + b"\n", PROJECT)
    before = footprint(shared_stack, context.project_id)
    answer = create_batch(via, shared_stack, from_file(input_file), PROJECT)
    error = answer.expect_error(400, "no_valid_records")
    expected = [(1, "invalid_json_line", None), (3, "invalid_method", "x"), (4, "invalid_record", None)]
    assert [(r["line"], r["code"], r["custom_id"]) for r in error["rejected_records"]] == expected
    assert error["rejected_count"] == 3
    # No batch; the only thing stored is the rejections file the answer names.
    after = footprint(shared_stack, context.project_id)
    assert after == {**before, "files": before["files"] + 1}
    listed = read_jsonl(shared_stack.client(PROJECT).files.content(error["rejected_records_file_id"]).content)
    assert [(r["line"], r["code"]) for r in listed] == [(line, code) for line, code, _ in expected]


@pytest.mark.parametrize("via", VIAS)
def test_a_file_of_blank_lines_has_no_records(shared_stack: RunningStack, context: Context, via: str) -> None:
    input_file = upload_records(shared_stack, b"\n \n\t\n", PROJECT)
    before = footprint(shared_stack, context.project_id)
    answer = create_batch(via, shared_stack, from_file(input_file), PROJECT)
    answer.expect_error(400, "empty_file")
    assert footprint(shared_stack, context.project_id) == before


# --- one bad record among good ones ------------------------------------------------------------


@dataclass(frozen=True)
class BadRecord:
    name: str
    line: bytes
    code: str
    custom_id: str | None


def _line(**overrides: Any) -> bytes:
    return json.dumps(record(**overrides)).encode()


BAD_RECORDS = [
    BadRecord("not JSON", b'{"custom_id": "bad", "method": "POST"', "invalid_json_line", None),
    BadRecord("invalid UTF-8", b'{"custom_id": "\xff\xfe"}', "invalid_json_line", None),
    BadRecord("a JSON array", b'["custom_id", "bad"]', "invalid_record", None),
    BadRecord("a JSON string", b'"just text"', "invalid_record", None),
    BadRecord("no custom_id", _line(custom_id=...), "missing_custom_id", None),
    BadRecord("empty custom_id", _line(custom_id=""), "missing_custom_id", None),
    BadRecord("numeric custom_id", _line(custom_id=7), "invalid_custom_id", None),
    BadRecord("custom_id over 512 chars", _line(custom_id="c" * 513), "invalid_custom_id", None),
    BadRecord("custom_id with NUL", _line(custom_id="a\u0000b"), "invalid_custom_id", None),
    BadRecord("duplicate custom_id", _line(custom_id="good-1"), "duplicate_custom_id", "good-1"),
    BadRecord("method GET", _line(method="GET"), "invalid_method", "bad"),
    BadRecord("no method", _line(method=...), "invalid_method", "bad"),
    BadRecord("url of another endpoint", _line(url="/v1/embeddings"), "url_mismatch", "bad"),
    BadRecord("no url", _line(url=...), "url_mismatch", "bad"),
    BadRecord("body a string", _line(body="hello"), "invalid_body", "bad"),
    BadRecord("no body", _line(body=...), "invalid_body", "bad"),
    BadRecord("body without model", _line(body={"messages": []}), "missing_model", "bad"),
    BadRecord("model not offered", _line(body={"model": "gpt-9", "messages": []}), "model_not_found", "bad"),
    BadRecord(
        "model for another endpoint",
        _line(body={"model": "text-embedding-3-small", "input": "x"}),
        "model_not_found",
        "bad",
    ),
    BadRecord("another model", _line(body={"model": "gpt-4o", "messages": []}), "model_mismatch", "bad"),
    BadRecord(
        "stream true",
        _line(body={"model": "gpt-4o-mini", "messages": [], "stream": True}),
        "stream_not_supported",
        "bad",
    ),
]


@pytest.mark.parametrize("via", VIAS)
@pytest.mark.parametrize("case", BAD_RECORDS, ids=lambda c: c.name)
def test_a_bad_record_is_rejected_alone_with_its_line(
    shared_stack: RunningStack, context: Context, case: BadRecord, via: str
) -> None:
    # Line 2 is blank: lines count from 1 and include blank lines, so the bad record is line 3.
    content = b"\n".join([good(1), b"", case.line, good(2)]) + b"\n"
    input_file = upload_records(shared_stack, content, PROJECT)
    answer = create_batch(via, shared_stack, from_file(input_file), PROJECT)
    assert answer.status == 200, answer.body
    batch = answer.body
    assert batch["status"] == "in_progress"
    assert batch["rejected_count"] == 1
    assert batch["request_counts"] == {"total": 3, "completed": 0, "failed": 1}
    [rejected] = batch["rejected_records"]
    assert (rejected["line"], rejected["code"], rejected["custom_id"]) == (3, case.code, case.custom_id)
    assert rejected["message"] and len(rejected["message"].encode()) <= 512
    items = db_rows(
        shared_stack.database_url,
        "SELECT line, state, body IS NULL AS no_body, error_code FROM items WHERE batch_id = :b ORDER BY idx",
        b=batch["id"],
    )
    assert [r.line for r in items] == [1, 3, 4]
    assert [(r.state, bool(r.no_body), r.error_code) for r in items if r.line == 3] == [
        ("rejected", True, case.code)
    ]
    rejections = read_jsonl(
        shared_stack.client(PROJECT).files.content(batch["rejected_records_file_id"]).content
    )
    assert [(r["line"], r["code"]) for r in rejections] == [(3, case.code)]


def test_a_long_message_is_cut_to_512_bytes(shared_stack: RunningStack, context: Context) -> None:
    url = "/v1/" + "é" * 600
    content = b"\n".join([good(1), _line(url=url)]) + b"\n"
    answer = create_batch(
        "http", shared_stack, from_file(upload_records(shared_stack, content, PROJECT)), PROJECT
    )
    [rejected] = answer.body["rejected_records"]
    assert rejected["code"] == "url_mismatch"
    assert len(rejected["message"].encode()) <= 512 and rejected["message"].endswith("...")


def test_rejected_records_appear_in_the_finished_batchs_error_file(
    shared_stack: RunningStack, context: Context
) -> None:
    content = jsonl([record("ok-1"), record("no-1", method="GET"), record("ok-2")])
    client = shared_stack.client(PROJECT)
    batch = client.batches.create(
        input_file_id=upload_records(shared_stack, content, PROJECT),
        endpoint=ENDPOINT,
        completion_window="24h",
    )
    done = wait_for_batch(client, batch.id)
    assert done.status == "completed"
    assert (done.request_counts.total, done.request_counts.completed, done.request_counts.failed) == (3, 2, 1)
    errors = read_jsonl(client.files.content(done.error_file_id).content)
    assert [(e["custom_id"], e["response"], e["error"]["code"]) for e in errors] == [
        ("no-1", None, "invalid_method")
    ]


@pytest.mark.parametrize("inline", [True, False], ids=["inline", "file"])
def test_a_custom_id_is_taken_even_by_a_record_rejected_for_something_else(
    shared_stack: RunningStack, context: Context, inline: bool
) -> None:
    """custom_ids are unique in a batch: the second `a` is a duplicate although the first `a`
    was rejected (its model), so it never runs beside the first one's error line."""
    chat = {"messages": [{"role": "user", "content": "taken"}]}
    requests = [
        {"custom_id": "a", "body": {"model": "no-such-model", **chat}},
        {"custom_id": "a", "body": {"model": "gpt-4o-mini", **chat}},
        {"custom_id": "b", "body": {"model": "gpt-4o-mini", **chat}},
    ]
    source: dict[str, Any] = (
        {"requests": requests}
        if inline
        else {"input_file_id": upload_records(shared_stack, [record(**r) for r in requests], PROJECT)}
    )
    answer = create_batch(
        "http", shared_stack, {"endpoint": ENDPOINT, "completion_window": "24h", **source}, PROJECT
    )
    assert answer.status == 200, answer.body
    rejected = [(r["line"], r["code"], r["custom_id"]) for r in answer.body["rejected_records"]]
    assert rejected == [(1, "model_not_found", "a"), (2, "duplicate_custom_id", "a")]
    done = wait_for_batch(shared_stack.client(PROJECT), answer.body["id"])
    assert (done.request_counts.total, done.request_counts.completed, done.request_counts.failed) == (3, 1, 2)


# --- inline requests ---------------------------------------------------------------------------


@pytest.mark.parametrize("via", VIAS)
def test_inline_requests_get_row_ids_and_line_numbers(
    shared_stack: RunningStack, context: Context, via: str
) -> None:
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "inline"}]}
    requests: list[Any] = [
        {"body": body},
        "not an object",
        {"custom_id": "full", "method": "POST", "url": ENDPOINT, "body": body},
        {"body": {**body, "model": "gpt-9"}},
    ]
    answer = create_batch(
        via, shared_stack, {"endpoint": ENDPOINT, "completion_window": "24h", "requests": requests}, PROJECT
    )
    assert answer.status == 200, answer.body
    rejected = [(r["line"], r["code"], r["custom_id"]) for r in answer.body["rejected_records"]]
    assert rejected == [(2, "invalid_record", None), (4, "model_not_found", "row-4")]
    items = db_rows(
        shared_stack.database_url,
        "SELECT custom_id FROM items WHERE batch_id = :b ORDER BY idx",
        b=answer.body["id"],
    )
    assert [r.custom_id for r in items] == ["row-1", None, "full", "row-4"]
    inline_file = shared_stack.client(PROJECT).files.retrieve(answer.body["input_file_id"])
    assert inline_file.purpose == "batch" and inline_file.filename == "inline-requests.jsonl"


@pytest.mark.parametrize("via", VIAS)
def test_inline_requests_that_all_fail_store_nothing(
    shared_stack: RunningStack, context: Context, via: str
) -> None:
    before = footprint(shared_stack, context.project_id)
    answer = create_batch(
        via,
        shared_stack,
        {"endpoint": ENDPOINT, "completion_window": "24h", "requests": [{"body": {"model": "gpt-9"}}, 5]},
        PROJECT,
    )
    error = answer.expect_error(400, "no_valid_records")
    assert error["param"] == "requests"
    assert [(r["line"], r["code"]) for r in error["rejected_records"]] == [
        (1, "model_not_found"),
        (2, "invalid_record"),
    ]
    # The inline input is not kept; only the rejections file the answer names is.
    assert footprint(shared_stack, context.project_id) == {**before, "files": before["files"] + 1}


# --- records nested too deeply to store --------------------------------------------------------


def nested(levels: int) -> Any:
    value: Any = "x"
    for _ in range(levels):
        value = [value]
    return value


def with_nested(value: Any, levels: int) -> str:
    """`value` as JSON, its "x_deep" string `levels` arrays deep (past what json.dumps writes)."""
    return json.dumps(value).replace('"x_deep"', "[" * levels + '"x"' + "]" * levels)


@pytest.mark.parametrize("levels", [300, 1015])
def test_a_record_nested_deeper_than_can_be_stored_is_rejected_alone(
    shared_stack: RunningStack, context: Context, levels: int
) -> None:
    """JSON is read 1024 levels deep but written back only 254 deep: such a record is rejected
    alone (from a file and inline, created and dry-run), not a 500 for the whole batch."""
    deep = record("deep")
    deep["body"]["x_sim"] = "x_deep"
    lines = [json.dumps(record("fine")), with_nested(deep, levels)]
    uploaded = upload_records(shared_stack, "\n".join(lines).encode(), PROJECT)
    sources = {
        "file": json.dumps(from_file(uploaded)),
        "inline": json.dumps({"endpoint": ENDPOINT, "completion_window": "24h", "requests": "lines"}).replace(
            '"lines"', f"[{', '.join(lines)}]"
        ),
    }
    for (name, source), dry_run in [(s, d) for s in sources.items() for d in ("false", "true")]:
        answer = httpx.post(
            f"{shared_stack.base_url}/batches",
            content=f'{source[:-1]}, "dry_run": {dry_run}}}',
            headers={
                "Authorization": f"Bearer {shared_stack.keys[PROJECT]}",
                "Content-Type": "application/json",
            },
            timeout=60,
        )
        assert answer.status_code == 200, (name, dry_run, answer.text)
        body = answer.json()
        assert body["request_counts"]["total"] == 2 and body["rejected_count"] == 1
        [rejected] = body["rejected_records"]
        assert (rejected["line"], rejected["custom_id"], rejected["code"]) == (2, "deep", "invalid_record")
        assert "nested too deeply" in rejected["message"] and "254" in rejected["message"], rejected


def test_a_message_batch_request_nested_too_deeply_is_errored_alone(shared_stack: RunningStack) -> None:
    client = sdk(shared_stack)
    deep = params("gpt-4o-mini", "deep", metadata={"user_id": "u"})
    deep["messages"][0]["content"] = [{"type": "text", "text": "deep", "x_deep": nested(300)}]
    batch = client.messages.batches.create(
        requests=[
            {"custom_id": "fine", "params": params("gpt-4o-mini", "fine")},  # type: ignore[list-item]
            {"custom_id": "deep", "params": deep},  # type: ignore[list-item]
        ]
    )
    assert batch.request_counts.errored == 1 and batch.request_counts.processing == 1
    wait_ended(client, batch.id)
    results = {r.custom_id: r.result for r in client.messages.batches.results(batch.id)}
    assert results["fine"].type == "succeeded"
    assert results["deep"].type == "errored" and "nested too deeply" in str(results["deep"]), results


# --- the endpoint is checked before a batch-level model ------------------------------------------


@pytest.mark.parametrize("endpoint", ["/v1/foo", "/v1/chat/completions/", "chat"])
@pytest.mark.parametrize("dry_run", [False, True], ids=["create", "dry run"])
def test_a_bad_endpoint_with_a_batch_model_is_invalid_endpoint(
    shared_stack: RunningStack, context: Context, endpoint: str, dry_run: bool
) -> None:
    """With a batch-level `model` the model used to be checked against the bad endpoint first,
    answering `model_not_found` naming `model`."""
    before = footprint(shared_stack, context.project_id)
    body = {"model": "gpt-4o-mini", "endpoint": endpoint, "requests": [{"messages": []}], "dry_run": dry_run}
    error = create_batch("http", shared_stack, body, PROJECT).expect_error(400, "invalid_endpoint")
    assert error["param"] == "endpoint"
    assert footprint(shared_stack, context.project_id) == before


# --- NUL in any text a request names: PostgreSQL refuses it in text ------------------------------


@dataclass(frozen=True)
class NulCase:
    name: str
    method: str
    path: str
    """`{batch}`, `{file}`, `{template}`: an ended batch, an input file, a recurring batch."""
    body: dict[str, Any] | None
    code: str
    param: str | None


NUL = "a\u0000b"
SIMPLE = {"model": "gpt-4o-mini", "requests": [{"messages": [{"role": "user", "content": "nul"}]}]}
SCHEDULED = {  # a recurring batch whose first run is years away (29 February)
    "input_file_id": "{file}",
    "endpoint": ENDPOINT,
    "completion_window": "24h",
    "cron": "0 5 29 2 *",
}

NUL_CASES = [
    NulCase("create: name", "POST", "/batches", {**SIMPLE, "name": NUL}, "invalid_name", "name"),
    NulCase(
        "dry run: name", "POST", "/batches", {**SIMPLE, "name": NUL, "dry_run": True}, "invalid_name", "name"
    ),
    NulCase(
        "create: metadata key",
        "POST",
        "/batches",
        {**SIMPLE, "metadata": {NUL: "v"}},
        "invalid_metadata",
        "metadata",
    ),
    NulCase(
        "create: metadata value",
        "POST",
        "/batches",
        {**SIMPLE, "metadata": {"k": NUL}},
        "invalid_metadata",
        "metadata.k",
    ),
    NulCase(
        "create: webhook_url",
        "POST",
        "/batches",
        {**SIMPLE, "webhook_url": f"http://127.0.0.1:9/{NUL}"},
        "invalid_webhook_url",
        "webhook_url",
    ),
    NulCase("create: model", "POST", "/batches", {**SIMPLE, "model": NUL}, "model_not_found", "model"),
    NulCase(
        "create: endpoint", "POST", "/batches", {**SIMPLE, "endpoint": NUL}, "invalid_endpoint", "endpoint"
    ),
    NulCase("recurring: name", "POST", "/batches", {**SCHEDULED, "name": NUL}, "invalid_name", "name"),
    NulCase(
        "recurring: metadata",
        "POST",
        "/batches",
        {**SCHEDULED, "metadata": {"k": NUL}},
        "invalid_metadata",
        "metadata.k",
    ),
    NulCase(
        "recurring: time zone",
        "POST",
        "/batches",
        {**SCHEDULED, "cron_timezone": NUL},
        "invalid_cron_timezone",
        "cron_timezone",
    ),
    NulCase(
        "update metadata: key",
        "POST",
        "/batches/{batch}/metadata",
        {"metadata": {NUL: "v"}},
        "invalid_metadata",
        "metadata",
    ),
    NulCase(
        "update metadata: value",
        "POST",
        "/batches/{batch}/metadata",
        {"metadata": {"k": NUL}},
        "invalid_metadata",
        "metadata.k",
    ),
    NulCase("retry: model", "POST", "/batches/{batch}/retry", {"model": NUL}, "invalid_value", "model"),
    NulCase("retry: only", "POST", "/batches/{batch}/retry", {"only": NUL}, "invalid_only", "only"),
    NulCase(
        "list batches: metadata_key",
        "GET",
        "/batches?metadata_key=a%00b",
        None,
        "invalid_value",
        "metadata_key",
    ),
    NulCase(
        "list batches: metadata_value",
        "GET",
        "/batches?metadata_key=k&metadata_value=a%00b",
        None,
        "invalid_value",
        "metadata_value",
    ),
    NulCase("list batches: status", "GET", "/batches?status=a%00b", None, "invalid_status", "status"),
    NulCase(
        "list batches: template_id",
        "GET",
        "/batches?template_id=btpl_%00",
        None,
        "invalid_value",
        "template_id",
    ),
    NulCase("list batches: after", "GET", "/batches?after=batch_%00", None, "invalid_after", "after"),
    NulCase("list files: purpose", "GET", "/files?purpose=a%00b", None, "invalid_purpose", "purpose"),
    NulCase("list files: after", "GET", "/files?after=file-%00", None, "invalid_after", "after"),
    NulCase(
        "list templates: after", "GET", "/batch_templates?after=btpl_%00", None, "invalid_after", "after"
    ),
    NulCase(
        "update template: cron", "POST", "/batch_templates/{template}", {"cron": NUL}, "invalid_cron", "cron"
    ),
    NulCase("usage: model", "GET", "/usage?model=a%00b", None, "invalid_value", "model"),
    NulCase(
        "usage events: api_key_id",
        "GET",
        "/usage/events?api_key_id=a%00b",
        None,
        "invalid_value",
        "api_key_id",
    ),
    NulCase("usage events: after", "GET", "/usage/events?after=usage_%00", None, "invalid_after", "after"),
    NulCase("results: state", "GET", "/batches/{batch}/results?state=a%00b", None, "invalid_state", "state"),
    NulCase(
        "message batches: after_id",
        "GET",
        "/messages/batches?after_id=msgbatch_%00",
        None,
        "invalid_request_error",
        None,
    ),
]


@dataclass(frozen=True)
class Owned:
    batch: str
    file: str
    template: str


@pytest.fixture(scope="module")
def owned(shared_stack: RunningStack, context: Context) -> Iterator[Owned]:
    """An ended batch, an input file and a recurring template of the project (deleted after)."""
    client = shared_stack.client(PROJECT)
    answer = create_batch("http", shared_stack, SIMPLE, PROJECT)
    wait_for_batch(client, answer.body["id"])
    scheduled = create_batch(
        "http", shared_stack, {**SCHEDULED, "input_file_id": context.input_file}, PROJECT
    )
    assert scheduled.status == 200, scheduled.body
    yield Owned(answer.body["id"], context.input_file, scheduled.body["id"])
    client.delete(f"/batch_templates/{scheduled.body['id']}", cast_to=object)


def _filled(value: Any, owned: Owned) -> Any:
    if isinstance(value, dict):
        return {k: _filled(v, owned) for k, v in value.items()}
    if isinstance(value, str):
        return value.format(batch=owned.batch, file=owned.file, template=owned.template)
    return value


@pytest.mark.parametrize("case", NUL_CASES, ids=lambda c: c.name)
def test_nul_in_any_request_text_is_a_400_on_every_database(
    shared_stack: RunningStack, context: Context, owned: Owned, case: NulCase
) -> None:
    """PostgreSQL refuses NUL in text: every text a request names is checked before it reaches
    a query (SQLite takes NUL, so the answer is the same 400 there), and nothing is stored."""
    before = footprint(shared_stack, context.project_id)
    metadata = db_rows(shared_stack.database_url, "SELECT metadata FROM batches WHERE id = :b", b=owned.batch)
    answer = httpx.request(
        case.method,
        f"{shared_stack.base_url}{_filled(case.path, owned)}",
        json=_filled(case.body, owned),
        headers={"Authorization": f"Bearer {shared_stack.keys[PROJECT]}"},
        timeout=60,
    )
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    if case.path.startswith("/messages/"):  # Anthropic's envelope
        assert error["type"] == case.code
    else:
        assert (error["code"], error["param"]) == (case.code, case.param), error
    assert footprint(shared_stack, context.project_id) == before
    assert (
        db_rows(shared_stack.database_url, "SELECT metadata FROM batches WHERE id = :b", b=owned.batch)
        == metadata
    )
