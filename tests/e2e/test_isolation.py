"""A project sees only its own files and batches: everything else is 404, never 403, and the
answer is exactly the one an id that exists nowhere gets (no hint that it exists)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx
import openai
import pytest

from tests.support import RunningStack, chat_records, db_rows, upload, wait_for_batch

ENDPOINT = "/v1/chat/completions"


@dataclass(frozen=True)
class Owned:
    """Objects of project 'default' that project 'other' probes."""

    input_file: str
    output_file: str
    finished_batch: str
    running_batch: str


@pytest.fixture(scope="module")
def owned(shared_stack: RunningStack) -> Iterator[Owned]:
    client = shared_stack.client()
    input_file = upload(client, chat_records(2, prefix="isolation")).id
    finished = client.batches.create(input_file_id=input_file, endpoint=ENDPOINT, completion_window="24h")
    finished = wait_for_batch(client, finished.id)
    slow = chat_records(1, prefix="isolation-slow", x_sim={"delay_ms": 20000})
    running = client.batches.create(
        input_file_id=upload(client, slow).id, endpoint=ENDPOINT, completion_window="24h", metadata={"a": "b"}
    )
    yield Owned(input_file, finished.output_file_id, finished.id, running.id)
    assert client.batches.cancel(running.id).status in ("cancelling", "cancelled")  # the owner still can


@dataclass(frozen=True)
class Probe:
    name: str
    method: str
    path: str  # `{id}` is replaced by the probed id
    target: str  # which Owned object
    body: dict[str, Any] | None = None


PROBES = [
    Probe("get file", "GET", "/files/{id}", "input_file"),
    Probe("get output file", "GET", "/files/{id}", "output_file"),
    Probe("download file", "GET", "/files/{id}/content", "input_file"),
    Probe("download output file", "GET", "/files/{id}/content", "output_file"),
    Probe("delete file", "DELETE", "/files/{id}", "input_file"),
    Probe("get batch", "GET", "/batches/{id}", "finished_batch"),
    Probe("cancel batch", "POST", "/batches/{id}/cancel", "running_batch", {}),
    Probe("update metadata", "POST", "/batches/{id}/metadata", "running_batch", {"metadata": {"x": "y"}}),
    Probe("batch results", "GET", "/batches/{id}/results", "finished_batch"),
    Probe(
        "create from the file",
        "POST",
        "/batches",
        "input_file",
        {"input_file_id": "{id}", "endpoint": ENDPOINT, "completion_window": "24h"},
    ),
]


def _send(stack: RunningStack, probe: Probe, ident: str) -> httpx.Response:
    body = None
    if probe.body is not None:
        body = {k: (ident if v == "{id}" else v) for k, v in probe.body.items()}
    return httpx.request(
        probe.method,
        stack.base_url + probe.path.replace("{id}", quote(ident, safe="")),
        json=body,
        headers={"Authorization": f"Bearer {stack.keys['other']}"},
        timeout=30,
    )


def _shape(answer: httpx.Response, ident: str) -> tuple[int, dict[str, Any]]:
    error = dict(answer.json()["error"])
    error["message"] = error["message"].replace(ident, "<id>")
    return answer.status_code, error


@pytest.mark.parametrize("probe", PROBES, ids=lambda p: p.name)
def test_another_projects_object_is_404_like_an_unknown_one(
    shared_stack: RunningStack, owned: Owned, probe: Probe
) -> None:
    ident = getattr(owned, probe.target)
    before = _state(shared_stack, ident)
    answer = _send(shared_stack, probe, ident)
    unknown_id = ident[:-6] + "zzzzzz"
    assert _shape(answer, ident) == _shape(_send(shared_stack, probe, unknown_id), unknown_id)
    assert answer.status_code == 404 and answer.json()["error"]["code"] == "not_found"
    assert _state(shared_stack, ident) == before  # nothing changed either


@pytest.mark.parametrize("probe", PROBES, ids=lambda p: p.name)
@pytest.mark.parametrize("ident", ["batch_a\x00b", "file-" + "x" * 60], ids=["NUL", "too long"])
def test_an_id_no_row_can_have_is_404_not_a_server_error(
    shared_stack: RunningStack, probe: Probe, ident: str
) -> None:
    """PostgreSQL refuses NUL in text parameters: such ids must not reach a query."""
    answer = _send(shared_stack, probe, ident)
    assert answer.status_code == 404 and answer.json()["error"]["code"] == "not_found", answer.text


def _state(stack: RunningStack, ident: str) -> list[Any]:
    if ident.startswith("file-"):
        return [
            tuple(r)
            for r in db_rows(stack.database_url, "SELECT id, bytes FROM files WHERE id = :i", i=ident)
        ]
    rows = db_rows(
        stack.database_url, "SELECT status, metadata, end_status FROM batches WHERE id = :i", i=ident
    )
    return [tuple(r) for r in rows]


SDK_CALLS: list[tuple[str, Callable[[openai.OpenAI, Owned], Any]]] = [
    ("files.retrieve", lambda c, o: c.files.retrieve(o.input_file)),
    ("files.content", lambda c, o: c.files.content(o.output_file)),
    ("files.delete", lambda c, o: c.files.delete(o.input_file)),
    ("batches.retrieve", lambda c, o: c.batches.retrieve(o.finished_batch)),
    ("batches.cancel", lambda c, o: c.batches.cancel(o.running_batch)),
    (
        "batches.create",
        lambda c, o: c.batches.create(input_file_id=o.input_file, endpoint=ENDPOINT, completion_window="24h"),
    ),
]


@pytest.mark.parametrize("call", SDK_CALLS, ids=lambda c: c[0])
def test_the_sdk_raises_not_found_for_another_projects_object(
    shared_stack: RunningStack, owned: Owned, call: tuple[str, Callable[[openai.OpenAI, Owned], Any]]
) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        call[1](shared_stack.client("other"), owned)
    assert caught.value.status_code == 404 and caught.value.code == "not_found"


def test_listings_show_only_the_callers_objects(shared_stack: RunningStack, owned: Owned) -> None:
    other = shared_stack.client("other")
    listed_files = {f.id for f in other.files.list()}
    listed_batches = {b.id for b in other.batches.list()}
    assert not listed_files & {owned.input_file, owned.output_file}
    assert not listed_batches & {owned.finished_batch, owned.running_batch}
    mine = shared_stack.client()
    assert {owned.input_file, owned.output_file} <= {f.id for f in mine.files.list()}
    assert owned.finished_batch in {b.id for b in mine.batches.list(limit=100)}
