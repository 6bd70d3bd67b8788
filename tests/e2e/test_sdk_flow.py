"""The OpenAI SDK, unchanged, drives a batch through Envoy and every service."""

from __future__ import annotations

import httpx
import openai
import pytest

from tests.support import RunningStack, chat_records, read_jsonl, upload, wait_for_batch


def test_batch_round_trip_with_the_openai_sdk(shared_stack: RunningStack) -> None:
    client = shared_stack.client()
    records = chat_records(50, prefix="flow")
    file = upload(client, records)
    assert (
        file.object == "file" and file.purpose == "batch" and file.bytes > 0 and file.id.startswith("file-")
    )

    batch = client.batches.create(
        input_file_id=file.id,
        endpoint="/v1/chat/completions",
        completion_window="24h",
        metadata={"team": "e2e"},
    )
    assert batch.id.startswith("batch_")
    assert batch.status == "in_progress"
    assert batch.request_counts.total == 50
    assert batch.metadata == {"team": "e2e"}

    done = wait_for_batch(client, batch.id)
    assert done.status == "completed"
    assert done.request_counts.completed == 50 and done.request_counts.failed == 0
    assert done.error_file_id is None and done.output_file_id
    for stamp in ("created_at", "in_progress_at", "finalizing_at", "completed_at"):
        assert isinstance(getattr(done, stamp), int), stamp
    assert done.in_progress_at <= done.finalizing_at <= done.completed_at
    assert (
        done.usage.input_tokens > 0
        and done.usage.total_tokens == done.usage.input_tokens + done.usage.output_tokens
    )

    lines = read_jsonl(client.files.content(done.output_file_id).content)
    assert [line["custom_id"] for line in lines] == [r["custom_id"] for r in records]  # input order
    for line, record in zip(lines, records, strict=True):
        assert line["id"].startswith("batch_req_")
        assert line["error"] is None
        assert line["response"]["status_code"] == 200
        assert line["response"]["request_id"]
        body = line["response"]["body"]
        assert body["object"] == "chat.completion"
        assert body["model"] == "gpt-4o-mini"
        assert record["body"]["messages"][0]["content"][:40] in body["choices"][0]["message"]["content"]

    output = client.files.retrieve(done.output_file_id)
    assert output.purpose == "batch_output" and output.bytes > 0


def test_batch_object_prints_every_openai_field_with_nulls(shared_stack: RunningStack) -> None:
    client = shared_stack.client()
    batch = client.batches.create(
        input_file_id=upload(client, chat_records(1, prefix="fields")).id,
        endpoint="/v1/chat/completions",
        completion_window="24h",
    )
    raw = httpx.get(
        f"{shared_stack.base_url}/batches/{batch.id}",
        headers={"Authorization": f"Bearer {shared_stack.key}"},
        timeout=10,
    ).json()
    for key in (
        "id",
        "object",
        "endpoint",
        "errors",
        "input_file_id",
        "completion_window",
        "status",
        "output_file_id",
        "error_file_id",
        "created_at",
        "in_progress_at",
        "expires_at",
        "finalizing_at",
        "completed_at",
        "failed_at",
        "expired_at",
        "cancelling_at",
        "cancelled_at",
        "request_counts",
        "metadata",
        "model",
        "usage",
    ):
        assert key in raw, key
    assert raw["object"] == "batch"
    assert raw["failed_at"] is None and raw["metadata"] is None and raw["errors"] is None
    assert isinstance(raw["created_at"], int) and isinstance(raw["expires_at"], int)
    assert raw["expires_at"] - raw["created_at"] == 24 * 3600
    assert set(raw["request_counts"]) == {"total", "completed", "failed"}
    wait_for_batch(client, batch.id)


def test_unknown_batch_is_404_in_the_openai_envelope(shared_stack: RunningStack) -> None:
    client = shared_stack.client()
    with pytest.raises(openai.NotFoundError) as caught:
        client.batches.retrieve("batch_doesnotexist")
    assert caught.value.status_code == 404
    assert caught.value.code == "not_found"
    body = caught.value.body
    assert isinstance(body, dict) and set(body) >= {"message", "type", "param", "code"}


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer bg-wrong"}, {"x-api-key": "bg-wrong"}])
def test_missing_or_wrong_key_is_401(shared_stack: RunningStack, headers: dict[str, str]) -> None:
    answer = httpx.get(f"{shared_stack.base_url}/batches", headers=headers, timeout=10)
    assert answer.status_code == 401
    assert answer.headers["content-type"] == "application/json"
    assert answer.json()["error"]["type"] == "authentication_error"


def test_wrong_key_raises_authentication_error_in_the_sdk(shared_stack: RunningStack) -> None:
    from openai import OpenAI

    client = OpenAI(base_url=shared_stack.base_url, api_key="bg-wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        client.files.list()


def test_x_api_key_header_is_accepted(shared_stack: RunningStack) -> None:
    answer = httpx.get(
        f"{shared_stack.base_url}/batches", headers={"x-api-key": shared_stack.key}, timeout=10
    )
    assert answer.status_code == 200
    assert answer.json()["object"] == "list"
