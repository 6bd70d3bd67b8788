"""POST /v1/batches/{id}/retry: exactly the unsuccessful items again, linked both ways,
idempotent per source and selection; clear errors for a running batch or nothing to retry."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import openai

from tests.support import RunningStack, chat_records, read_jsonl, run_cli, upload, wait_for_batch


def post_retry(stack: RunningStack, batch_id: str, **body: Any) -> httpx.Response:
    return httpx.post(
        f"{stack.base_url}/batches/{batch_id}/retry",
        json=body,
        headers={"Authorization": f"Bearer {stack.keys['default']}"},
        timeout=60,
    )


def failing_batch(client: Any, prefix: str) -> tuple[Any, list[dict[str, Any]]]:
    """A finished batch of 5: items 1 and 3 fail once with a 400 (not retried by the executor),
    so a retry of them succeeds."""
    records = chat_records(5, prefix=prefix)
    for i in (1, 3):
        records[i]["body"]["x_sim"] = {"status": 400, "times": 1}
    batch = client.batches.create(
        input_file_id=upload(client, records).id,
        endpoint="/v1/chat/completions",
        completion_window="24h",
        metadata={"team": "retry"},
    )
    done = wait_for_batch(client, batch.id)
    assert (done.request_counts.completed, done.request_counts.failed) == (3, 2)
    return done, records


def test_retry_reruns_exactly_the_failed_items_and_links_both_ways(shared_stack: RunningStack) -> None:
    client = shared_stack.client()
    source, records = failing_batch(client, f"retry-{time.time_ns()}")

    answer = post_retry(shared_stack, source.id)
    assert answer.status_code == 200, answer.text
    retry = answer.json()
    assert retry["retry_of"] == source.id and retry["id"] != source.id
    assert retry["request_counts"]["total"] == 2 and retry["metadata"] == {"team": "retry"}
    done = wait_for_batch(client, retry["id"])
    assert done.status == "completed" and done.request_counts.completed == 2
    lines = read_jsonl(client.files.content(done.output_file_id).content)
    assert [line["custom_id"] for line in lines] == [records[1]["custom_id"], records[3]["custom_id"]]
    inputs = read_jsonl(client.files.content(done.input_file_id).content)
    assert [i["body"] for i in inputs] == [records[1]["body"], records[3]["body"]]  # bodies as sent

    again = post_retry(shared_stack, source.id)  # idempotent per source and selection
    assert again.status_code == 200 and again.json()["id"] == retry["id"]
    assert again.headers.get("idempotent-replayed") == "true"
    through_sdk = client.post(f"/batches/{source.id}/retry", body={}, cast_to=openai.types.Batch)
    assert through_sdk.id == retry["id"] and through_sdk.model_extra["retry_of"] == source.id
    assert client.batches.retrieve(source.id).model_extra["retries"] == [retry["id"]]
    assert client.batches.retrieve(retry["id"]).model_extra["retries"] == []
    listed = {b.id: b for b in client.batches.list(limit=10).data}
    assert listed[source.id].model_extra["retries"] == [retry["id"]]
    assert listed[retry["id"]].model_extra["retry_of"] == source.id

    # Another model is another selection: a second retry batch, every body pointing at it.
    other = post_retry(shared_stack, source.id, only="failed", model="gpt-4o")
    assert other.status_code == 200 and other.json()["id"] != retry["id"]
    moved = wait_for_batch(client, other.json()["id"])
    inputs = read_jsonl(client.files.content(moved.input_file_id).content)
    assert {i["body"]["model"] for i in inputs} == {"gpt-4o"}
    assert client.batches.retrieve(source.id).model_extra["retries"] == [retry["id"], moved.id]

    unknown = post_retry(shared_stack, source.id, model="no-such-model")
    assert unknown.status_code == 400 and unknown.json()["error"]["code"] == "model_not_found"
    embedding = post_retry(shared_stack, source.id, model="text-embedding-3-small")  # not for chat
    assert (embedding.json()["error"]["code"], embedding.json()["error"]["param"]) == (
        "model_not_found",
        "model",
    )
    assert client.batches.retrieve(source.id).model_extra["retries"] == [retry["id"], moved.id]

    # The retry itself succeeded entirely: nothing left to retry.
    empty = post_retry(shared_stack, retry["id"])
    assert empty.status_code == 400 and empty.json()["error"]["code"] == "nothing_to_retry"


def test_retry_refuses_running_batches_bad_selections_and_other_projects(shared_stack: RunningStack) -> None:
    client = shared_stack.client()
    records = chat_records(2, prefix=f"retry-running-{time.time_ns()}", x_sim={"delay_ms": 3000})
    running = client.batches.create(
        input_file_id=upload(client, records).id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    refused = post_retry(shared_stack, running.id)
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "batch_not_ended"
    bad = post_retry(shared_stack, running.id, only="succeeded")
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_only"
    assert bad.json()["error"]["param"] == "only"
    unknown = post_retry(shared_stack, running.id, colour="red")
    assert unknown.status_code == 400 and unknown.json()["error"]["code"] == "unknown_parameter"
    hidden = httpx.post(
        f"{shared_stack.base_url}/batches/{running.id}/retry",
        json={},
        headers={"Authorization": f"Bearer {shared_stack.keys['other']}"},
        timeout=30,
    )
    assert hidden.status_code == 404
    done = wait_for_batch(client, running.id)
    nothing = post_retry(shared_stack, done.id, only="expired")
    assert nothing.status_code == 400 and nothing.json()["error"]["code"] == "nothing_to_retry"
    assert client.batches.retrieve(done.id).model_extra["retries"] == []


def test_cli_retry_prints_the_new_batch_and_waits(shared_stack: RunningStack, tmp_path: Any) -> None:
    client = shared_stack.client()
    source, _records = failing_batch(client, f"retry-cli-{time.time_ns()}")
    env = {"BATCHGATE_BASE_URL": shared_stack.base_url, "BATCHGATE_API_KEY": shared_stack.keys["default"]}
    answer = run_cli(
        "batches", "retry", source.id, "--only", "failed", "--wait", "-o", str(tmp_path), env=env
    )
    assert answer.returncode == 0, answer.stderr
    new_id = answer.stdout.split()[0]
    assert client.batches.retrieve(new_id).model_extra["retry_of"] == source.id
    shown = run_cli("batches", "get", source.id, env=env)
    assert f"retried as {new_id}" in shown.stdout


def test_concurrent_retries_of_one_selection_make_one_batch(shared_stack: RunningStack) -> None:
    client = shared_stack.client()
    source, _records = failing_batch(client, f"retry-race-{time.time_ns()}")
    with ThreadPoolExecutor(max_workers=4) as pool:
        answers = list(pool.map(lambda _: post_retry(shared_stack, source.id, only="failed"), range(4)))
    assert {a.status_code for a in answers} == {200}, [a.text for a in answers]
    made = {a.json()["id"] for a in answers}
    assert len(made) == 1
    assert client.batches.retrieve(source.id).model_extra["retries"] == sorted(made)
