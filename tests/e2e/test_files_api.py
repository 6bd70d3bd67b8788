"""The Files API as the openai SDK and curl use it: upload, list and page, get, download, delete."""

from __future__ import annotations

import io
import socket
import uuid
from collections.abc import Iterator

import httpx
import openai
import pytest

from tests.e2e.ingest_client import VIAS, upload_file
from tests.support import (
    RunningStack,
    add_project,
    chat_records,
    db_rows,
    eventually,
    jsonl,
    upload,
    wait_for_batch,
)

ENDPOINT = "/v1/chat/completions"
DAY = 86400


def project_files(stack: RunningStack, project_id: str) -> tuple[int, int]:
    """(files of the project, upload blobs that no file references)."""
    row = db_rows(
        stack.database_url,
        """
        SELECT (SELECT count(*) FROM files WHERE project_id = :p),
               (SELECT count(*) FROM blobs WHERE owner = :owner AND id NOT IN (SELECT blob_id FROM files))
        """,
        p=project_id,
        owner=f"upload:{project_id}",
    )[0]
    return int(row[0]), int(row[1])


@pytest.fixture(scope="module")
def project_id(shared_stack: RunningStack) -> str:
    return add_project(shared_stack, "files")


@pytest.mark.parametrize("via", VIAS)
def test_upload_answers_a_file_object_that_expires_in_30_days(
    shared_stack: RunningStack, project_id: str, via: str
) -> None:
    content = jsonl(chat_records(3, prefix="files-upload"))
    answer = upload_file(via, shared_stack, content, "files")
    assert answer.status == 200, answer.body
    file = answer.body
    assert file["object"] == "file" and file["id"].startswith("file-")
    assert (file["purpose"], file["status"], file["bytes"], file["filename"]) == (
        "batch",
        "processed",
        len(content),
        "input.jsonl",
    )
    assert file["expires_at"] - file["created_at"] == 30 * DAY
    assert shared_stack.client("files").files.content(file["id"]).content == content


@pytest.mark.parametrize("via", VIAS)
def test_expires_after_sets_the_lifetime(shared_stack: RunningStack, project_id: str, via: str) -> None:
    answer = upload_file(
        via, shared_stack, b'{"a": 1}\n', "files", expires_after={"anchor": "created_at", "seconds": 7200}
    )
    assert answer.status == 200, answer.body
    assert answer.body["expires_at"] - answer.body["created_at"] == 7200


BAD_UPLOADS = [
    ("empty file", b"", "batch", None, "empty_file"),
    ("purpose fine-tune", b"{}\n", "fine-tune", None, "invalid_purpose"),
    (
        "expiry of a minute",
        b"{}\n",
        "batch",
        {"anchor": "created_at", "seconds": 60},
        "invalid_expires_after",
    ),
    (
        "expiry over 30 days",
        b"{}\n",
        "batch",
        {"anchor": "created_at", "seconds": 31 * DAY},
        "invalid_expires_after",
    ),
    (
        "expiry anchor",
        b"{}\n",
        "batch",
        {"anchor": "last_active_at", "seconds": 7200},
        "invalid_expires_after",
    ),
]


@pytest.mark.parametrize("via", VIAS)
@pytest.mark.parametrize("case", BAD_UPLOADS, ids=lambda c: c[0])
def test_bad_upload_is_400_and_stores_nothing(
    shared_stack: RunningStack, project_id: str, case: tuple[str, bytes, str, dict | None, str], via: str
) -> None:
    _name, content, purpose, expires_after, code = case
    before = project_files(shared_stack, project_id)
    answer = upload_file(via, shared_stack, content, "files", purpose=purpose, expires_after=expires_after)
    answer.expect_error(400, code)
    assert project_files(shared_stack, project_id) == before


@pytest.mark.parametrize(
    "request_kwargs, code",
    [
        ({"json": {"purpose": "batch"}}, "invalid_content_type"),
        ({"data": {"purpose": "batch"}, "files": {"other": ("x.jsonl", b"{}\n")}}, "missing_file"),
    ],
    ids=["json body", "no file part"],
)
def test_malformed_upload_is_400(
    shared_stack: RunningStack, project_id: str, request_kwargs: dict, code: str
) -> None:
    before = project_files(shared_stack, project_id)
    answer = httpx.post(
        f"{shared_stack.base_url}/files",
        headers={"Authorization": f"Bearer {shared_stack.keys['files']}"},
        timeout=30,
        **request_kwargs,
    )
    assert (answer.status_code, answer.json()["error"]["code"]) == (400, code)
    assert project_files(shared_stack, project_id) == before


@pytest.mark.parametrize(
    "method, form, message",
    [
        ("POST", {}, "Missing required parameter: 'purpose'."),
        ("POST", {"purpose": "fine-tune"}, "'purpose' must be 'batch', not 'fine-tune'."),
        ("GET", {"purpose": "it's"}, "'purpose' must be 'batch' or 'batch_output', not 'it's'."),
    ],
    ids=["upload without purpose", "upload purpose", "listing purpose"],
)
def test_a_bad_purpose_is_told_in_openais_words(
    shared_stack: RunningStack, project_id: str, method: str, form: dict[str, str], message: str
) -> None:
    before = project_files(shared_stack, project_id)
    sent = {"data": form, "files": {"file": ("ok.jsonl", b"{}\n")}} if method == "POST" else {"params": form}
    answer = httpx.request(
        method,
        f"{shared_stack.base_url}/files",
        headers={"Authorization": f"Bearer {shared_stack.keys['files']}"},
        timeout=30,
        **sent,  # type: ignore[arg-type]
    )
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert (error["code"], error["param"], error["message"]) == ("invalid_purpose", "purpose", message)
    assert project_files(shared_stack, project_id) == before


def incomplete_blobs(stack: RunningStack, project_id: str) -> int:
    """Upload blobs of the project still being written."""
    return int(
        db_rows(
            stack.database_url,
            "SELECT count(*) FROM blobs WHERE owner = :owner AND NOT complete",
            owner=f"upload:{project_id}",
        )[0][0]
    )


def test_an_upload_whose_client_dies_midway_stores_nothing(
    shared_stack: RunningStack, project_id: str
) -> None:
    """Half of the declared body arrives, then the connection closes: no file, no blob left."""
    before = project_files(shared_stack, project_id)
    content = jsonl(chat_records(1000, prefix="files-cut", user="u" * 3000))  # 3 MB: chunks stored on the way
    body = (
        b'--XX\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n'
        b'--XX\r\nContent-Disposition: form-data; name="file"; filename="cut.jsonl"\r\n\r\n' + content
    )
    head = (
        f"POST /v1/files HTTP/1.1\r\nHost: gateway\r\nAuthorization: Bearer {shared_stack.keys['files']}\r\n"
        f"Content-Type: multipart/form-data; boundary=XX\r\nContent-Length: {2 * len(body)}\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", shared_stack.settings.port), timeout=30) as conn:
        conn.sendall(head.encode() + body)
        eventually(lambda: incomplete_blobs(shared_stack, project_id))  # the upload is under way
    eventually(lambda: incomplete_blobs(shared_stack, project_id) == 0)
    assert project_files(shared_stack, project_id) == before


def test_listing_pages_with_after_limit_order_and_purpose(shared_stack: RunningStack) -> None:
    add_project(shared_stack, "paging")
    client = shared_stack.client("paging")
    ids = [upload(client, chat_records(1, prefix=f"paging-{i}")).id for i in range(5)]
    auth = {"Authorization": f"Bearer {shared_stack.keys['paging']}"}

    def page(**params: object) -> dict:
        answer = httpx.get(f"{shared_stack.base_url}/files", params=params, headers=auth, timeout=30)
        assert answer.status_code == 200, answer.text
        return answer.json()

    first = page(limit=2)
    assert [f["id"] for f in first["data"]] == ids[::-1][:2]  # newest first by default
    assert (first["object"], first["has_more"], first["first_id"], first["last_id"]) == (
        "list",
        True,
        ids[4],
        ids[3],
    )
    last = page(limit=2, after=ids[1])
    assert [f["id"] for f in last["data"]] == [ids[0]] and last["has_more"] is False
    ascending = page(order="asc", limit=3, after=ids[0])
    assert [f["id"] for f in ascending["data"]] == ids[1:4] and ascending["has_more"] is True
    empty = page(purpose="batch_output")
    assert (empty["data"], empty["first_id"], empty["last_id"], empty["has_more"]) == ([], None, None, False)
    assert [f.id for f in client.files.list(limit=2)] == ids[::-1]  # the SDK's auto-paging walks every page

    batch = client.batches.create(
        input_file_id=upload(
            client,
            [*chat_records(1, prefix="paging-ok"), {"custom_id": "no", "method": "GET", "url": ENDPOINT}],
        ).id,
        endpoint=ENDPOINT,
        completion_window="24h",
    )
    done = wait_for_batch(client, batch.id)
    outputs = page(purpose="batch_output")["data"]
    assert {f["id"] for f in outputs} == {
        done.output_file_id,
        done.error_file_id,
        batch.rejected_records_file_id,
    }
    assert all(f["purpose"] == "batch_output" and f["object"] == "file" for f in outputs)
    assert client.files.retrieve(done.output_file_id).purpose == "batch_output"


@pytest.mark.parametrize(
    "params",
    [{"limit": -1}, {"limit": 10001}, {"order": "sideways"}, {"after": "x" * 41}, {"purpose": "fine-tune"}],
)
def test_bad_listing_parameters_are_400(shared_stack: RunningStack, params: dict) -> None:
    answer = httpx.get(
        f"{shared_stack.base_url}/files",
        params=params,
        headers={"Authorization": f"Bearer {shared_stack.key}"},
        timeout=30,
    )
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["type"] == "invalid_request_error"


def test_download_streams_the_bytes_back_unchanged(shared_stack: RunningStack) -> None:
    content = b"".join(f'{{"n": {i}, "pad": "{"x" * 1000}"}}\n'.encode() for i in range(3000))  # ~3 MB
    file = shared_stack.client().files.create(file=("big.jsonl", io.BytesIO(content)), purpose="batch")
    with httpx.stream(
        "GET",
        f"{shared_stack.base_url}/files/{file.id}/content",
        headers={"Authorization": f"Bearer {shared_stack.key}"},
        timeout=60,
    ) as answer:
        assert answer.status_code == 200
        assert answer.headers.get("transfer-encoding") == "chunked"
        assert b"".join(answer.iter_bytes()) == content


@pytest.fixture
def running_batch(shared_stack: RunningStack) -> Iterator[tuple[str, str]]:
    client = shared_stack.client()
    slow = chat_records(1, prefix=f"delete-{uuid.uuid4().hex[:6]}", x_sim={"delay_ms": 3000})
    input_file = upload(client, slow).id
    batch = client.batches.create(input_file_id=input_file, endpoint=ENDPOINT, completion_window="24h")
    yield input_file, batch.id
    wait_for_batch(client, batch.id)


def test_delete_is_409_while_a_running_batch_reads_the_file(
    shared_stack: RunningStack, running_batch: tuple[str, str]
) -> None:
    input_file, batch_id = running_batch
    client = shared_stack.client()
    with pytest.raises(openai.ConflictError) as caught:
        client.files.delete(input_file)
    assert caught.value.code == "file_in_use" and batch_id in caught.value.message
    assert client.files.retrieve(input_file).id == input_file

    wait_for_batch(client, batch_id)
    blob = db_rows(shared_stack.database_url, "SELECT blob_id FROM files WHERE id = :f", f=input_file)[0][0]
    deleted = client.files.delete(input_file)
    assert (deleted.id, deleted.object, deleted.deleted) == (input_file, "file", True)
    with pytest.raises(openai.NotFoundError):
        client.files.retrieve(input_file)
    with pytest.raises(openai.NotFoundError):
        client.files.delete(input_file)
    assert (
        db_rows(shared_stack.database_url, "SELECT count(*) FROM blob_chunks WHERE blob_id = :b", b=blob)[0][
            0
        ]
        == 0
    )
    assert client.batches.retrieve(batch_id).status == "completed"  # the batch keeps its results
