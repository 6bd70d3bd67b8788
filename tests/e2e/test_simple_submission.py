"""The simplest submission: batch-level `model` and `name`, `requests` of bare chat bodies,
endpoint and window defaulted; a row naming another model is rejected alone."""

from __future__ import annotations

import time
from typing import Any

import httpx
import openai
import pytest

from tests.support import RunningStack, read_jsonl, run_cli, wait_for_batch


def create(stack: RunningStack, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(
        f"{stack.base_url}/batches",
        json=body,
        headers={"Authorization": f"Bearer {stack.keys['default']}"},
        timeout=60,
    )


def ask(text: str, **extra: Any) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}], **extra}


def test_bare_chat_bodies_with_a_batch_model_run_as_a_chat_batch(shared_stack: RunningStack) -> None:
    client = shared_stack.client()
    tag = f"simple-{time.time_ns()}"
    batch = client.post(
        "/batches",
        body={
            "model": "gpt-4o-mini",
            "name": f"nightly {tag}",
            "requests": [
                ask(f"{tag} one"),
                ask(f"{tag} two", custom_id="q2", temperature=0),
                ask(f"{tag} three", model="gpt-4o"),  # another model: rejected alone
                ask(f"{tag} four", model="gpt-4o-mini"),  # the batch's own: fine
            ],
        },
        cast_to=openai.types.Batch,
    )
    assert (batch.endpoint, batch.completion_window, batch.model) == (
        "/v1/chat/completions",
        "24h",
        "gpt-4o-mini",
    )
    assert batch.model_extra["name"] == f"nightly {tag}" and batch.model_extra["rejected_count"] == 1
    (rejected,) = batch.model_extra["rejected_records"]
    assert (rejected["line"], rejected["custom_id"], rejected["code"]) == (3, "row-3", "model_mismatch")

    done = wait_for_batch(client, batch.id)
    assert (done.request_counts.completed, done.request_counts.failed) == (3, 1)
    inputs = read_jsonl(client.files.content(done.input_file_id).content)
    assert [i["custom_id"] for i in inputs] == ["row-1", "q2", "row-3", "row-4"]
    assert inputs[1] == {
        "custom_id": "q2",
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {"model": "gpt-4o-mini", **ask(f"{tag} two", temperature=0)},
    }
    simple = read_jsonl(
        client.get(
            f"/batches/{done.id}/results", cast_to=httpx.Response, options={"params": {"format": "simple"}}
        ).text
    )
    assert [s["custom_id"] for s in simple] == ["row-1", "q2", "row-3", "row-4"]
    assert isinstance(simple[0]["content"], str) and simple[2]["error"]["code"] == "model_mismatch"

    assert client.batches.retrieve(done.id).model_extra["name"] == f"nightly {tag}"
    listed = {b.id: b for b in client.batches.list(limit=20).data}
    assert listed[done.id].model_extra["name"] == f"nightly {tag}"
    env = {"BATCHGATE_BASE_URL": shared_stack.base_url, "BATCHGATE_API_KEY": shared_stack.keys["default"]}
    shown = run_cli("batches", "list", env=env)
    assert shown.returncode == 0 and "NAME" in shown.stdout.splitlines()[0]
    assert any(done.id in line and f"nightly {tag}" in line for line in shown.stdout.splitlines())


@pytest.mark.parametrize(
    ("body", "code", "param"),
    [
        ({"model": "no-such-model", "requests": [ask("x")]}, "model_not_found", "model"),
        ({"model": "text-embedding-3-small", "requests": [ask("x")]}, "model_not_found", "model"),
        ({"model": "gpt-4o-mini", "name": "n" * 257, "requests": [ask("x")]}, "invalid_name", "name"),
        ({"model": "gpt-4o-mini", "requests": [ask("x", model="gpt-4o")]}, "no_valid_records", "requests"),
        ({"requests": [ask("x")], "completion_window": "24h"}, "invalid_endpoint", "endpoint"),
    ],
)
def test_bad_simple_submissions_are_refused_and_store_nothing(
    shared_stack: RunningStack, body: dict[str, Any], code: str, param: str
) -> None:
    client = shared_stack.client()
    before = client.batches.list(limit=1).data[0].id if client.batches.list(limit=1).data else None
    answer = create(shared_stack, body)
    assert answer.status_code == 400, answer.text
    assert (answer.json()["error"]["code"], answer.json()["error"]["param"]) == (code, param)
    after = client.batches.list(limit=1).data
    assert (after[0].id if after else None) == before
