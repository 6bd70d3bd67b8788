"""Configurable limits and ingest's sweeps, on a private stack with tiny limits.

Every limit answers with the OpenAI envelope and a code naming it, and stores nothing: an
upload past the cap is cut off with 413, too many records or too large an inline body are
refused, an oversized JSON body is refused by Envoy itself. Expired files read as 404 and
the sweep reclaims their blobs.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.ingest_client import VIAS, create_batch, from_file, upload_file, upload_records
from tests.support import RunningStack, chat_records, db_rows, fresh_database, jsonl, running_stack

ENDPOINT = "/v1/chat/completions"
LIMITS = {
    "BATCHGATE_MAX_BATCH_RECORDS": "5",
    "BATCHGATE_MAX_FILE_BYTES": "20000",
    "BATCHGATE_MAX_INLINE_BYTES": "4096",
    "BATCHGATE_MAX_RECORD_BYTES": "2000",
    "BATCHGATE_INGEST_SWEEP_INTERVAL_S": "0.5",
    "BATCHGATE_GRPC_MAX_MESSAGE_BYTES": str(4 * 1024 * 1024),
}
ENVOY_BODY_LIMIT = 4096 + 1024 * 1024  # gateway/render.py: inline limit plus slack


@pytest.fixture(scope="module")
def stack(db_kind: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    tmp: Path = tmp_path_factory.mktemp(f"limits-{db_kind}")
    with fresh_database(db_kind, tmp) as url, running_stack(tmp, url, **LIMITS) as running:
        yield running


def stored(stack: RunningStack) -> dict[str, int]:
    row = db_rows(
        stack.database_url,
        """
        SELECT (SELECT count(*) FROM batches) AS batches,
               (SELECT count(*) FROM items) AS items,
               (SELECT count(*) FROM files) AS files,
               (SELECT count(*) FROM blobs) AS blobs
        """,
    )[0]
    return dict(row._mapping)


def settled(stack: RunningStack) -> dict[str, int]:
    """`stored` once running batches have finished (their output files are written)."""
    client = stack.client()
    deadline = time.monotonic() + 60
    while any(b.status not in ("completed", "failed", "cancelled", "expired") for b in client.batches.list()):
        assert time.monotonic() < deadline, "batches still running"
        time.sleep(0.1)
    return stored(stack)


@pytest.mark.parametrize("via", VIAS)
def test_an_upload_past_the_cap_is_413_and_stores_nothing(stack: RunningStack, via: str) -> None:
    before = settled(stack)
    answer = upload_file(via, stack, b"x" * 19_000 + b"\n" + b"y" * 5_000)
    error = answer.expect_error(413, "file_too_large")
    assert "20000" in error["message"]
    assert stored(stack) == before


def test_an_upload_at_the_cap_is_accepted(stack: RunningStack) -> None:
    assert upload_file("http", stack, b"x" * 19_999 + b"\n").status == 200


@pytest.mark.parametrize("via", VIAS)
def test_more_records_than_the_limit_is_input_too_large(stack: RunningStack, via: str) -> None:
    input_file = upload_records(stack, chat_records(6, prefix="limit"))
    before = settled(stack)
    answer = create_batch(via, stack, from_file(input_file))
    error = answer.expect_error(400, "input_too_large")
    assert "5 records" in error["message"]
    assert stored(stack) == before


def test_the_record_limit_counts_records_not_blank_lines(stack: RunningStack) -> None:
    content = jsonl(chat_records(5, prefix="limit-blank")).replace(b"\n", b"\n\n")
    answer = create_batch("http", stack, from_file(upload_records(stack, content)))
    assert answer.status == 200, answer.body
    assert answer.body["request_counts"]["total"] == 5


def _inline(content_chars: int, n: int = 1) -> dict[str, Any]:
    requests = [
        {"body": {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "x" * content_chars}]}}
    ] * n
    return {"endpoint": ENDPOINT, "completion_window": "24h", "requests": requests}


@pytest.mark.parametrize("via", VIAS)
def test_inline_requests_past_the_limit_are_413_and_store_nothing(stack: RunningStack, via: str) -> None:
    before = settled(stack)
    answer = create_batch(via, stack, _inline(1500, n=3))  # ~4.6 kB of JSONL
    error = answer.expect_error(413, "input_too_large")
    assert "4096" in error["message"] and error["param"] == "requests"
    assert stored(stack) == before


@pytest.mark.parametrize("via", VIAS)
def test_a_json_body_past_envoys_limit_gets_an_openai_413(stack: RunningStack, via: str) -> None:
    before = settled(stack)
    answer = create_batch(via, stack, _inline(ENVOY_BODY_LIMIT))
    error = answer.expect_error(413, "request_too_large")
    assert str(ENVOY_BODY_LIMIT) in error["message"]
    assert stored(stack) == before


def test_a_chunked_body_past_the_grpc_limit_gets_an_openai_413(stack: RunningStack) -> None:
    data = json.dumps(_inline(5 * 1024 * 1024)).encode()  # beyond this stack's 4 MiB gRPC message limit

    def chunks() -> Iterator[bytes]:  # no content-length: Envoy cannot refuse it up front
        for start in range(0, len(data), 1 << 20):
            yield data[start : start + (1 << 20)]

    before = settled(stack)
    answer = httpx.post(
        f"{stack.base_url}/batches",
        content=chunks(),
        headers={"Authorization": f"Bearer {stack.key}", "content-type": "application/json"},
        timeout=120,
    )
    assert answer.status_code == 413, answer.text
    assert answer.json()["error"]["code"] == "request_too_large"
    assert stored(stack) == before


def test_a_record_past_the_size_limit_is_rejected_alone(stack: RunningStack) -> None:
    records = [*chat_records(1, prefix="small"), *chat_records(1, prefix="big", padding="p" * 2500)]
    answer = create_batch("http", stack, from_file(upload_records(stack, records)))
    assert answer.status == 200, answer.body
    [rejected] = answer.body["rejected_records"]
    assert (rejected["line"], rejected["code"]) == (2, "record_too_large")
    assert "2000" in rejected["message"]


def test_expired_files_read_as_404_and_the_sweep_reclaims_their_blobs(stack: RunningStack) -> None:
    client = stack.client()
    file_id = upload_records(stack, chat_records(2, prefix="expiring"))
    blob = db_rows(stack.database_url, "SELECT blob_id FROM files WHERE id = :f", f=file_id)[0][0]
    # The shortest lifetime the API allows is an hour: move this one's end into the past.
    db_rows(
        stack.database_url, "UPDATE files SET expires_at = :t WHERE id = :f", t=time.time() - 1, f=file_id
    )
    auth = {"Authorization": f"Bearer {stack.key}"}
    for path in (f"/files/{file_id}", f"/files/{file_id}/content"):
        answer = httpx.get(stack.base_url + path, headers=auth, timeout=30)
        assert (answer.status_code, answer.json()["error"]["code"]) == (404, "not_found")
    assert file_id not in {f.id for f in client.files.list()}
    answer = create_batch("http", stack, from_file(file_id))
    answer.expect_error(404, "not_found")

    deadline = time.monotonic() + 60
    while db_rows(stack.database_url, "SELECT count(*) FROM blob_chunks WHERE blob_id = :b", b=blob)[0][0]:
        assert time.monotonic() < deadline, "the sweep did not reclaim the expired file's blob"
        time.sleep(0.2)
    assert db_rows(stack.database_url, "SELECT count(*) FROM files WHERE id = :f", f=file_id)[0][0] == 0
    assert db_rows(stack.database_url, "SELECT count(*) FROM blobs WHERE id = :b", b=blob)[0][0] == 0


@pytest.mark.parametrize("via", VIAS)
def test_a_dry_run_meets_the_same_limits_and_stores_nothing(stack: RunningStack, via: str) -> None:
    before = settled(stack)
    too_large = create_batch(via, stack, {**_inline(1500, n=3), "dry_run": True})
    assert "4096" in too_large.expect_error(413, "input_too_large")["message"]
    many = {"model": "gpt-4o-mini", "dry_run": True, "requests": [{"messages": []}] * 6}  # limit: 5
    assert create_batch(via, stack, many).expect_error(400, "input_too_large")["param"] == "requests"
    big = {"model": "gpt-4o-mini", "dry_run": True, "requests": [{"messages": []}, {"messages": "p" * 2500}]}
    answer = create_batch(via, stack, big)
    assert answer.status == 200, answer.body
    assert [(r["line"], r["code"]) for r in answer.body["rejected_records"]] == [(2, "record_too_large")]
    assert stored(stack) == before
