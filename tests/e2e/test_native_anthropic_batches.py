"""Provider-native batches on an Anthropic-kind provider: a fake Message Batches API on loopback
gets the records translated to Messages requests, and its results come back as OpenAI batch
lines, in input order, through the unchanged openai SDK flow."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from batchgate.services.common.db.schema import native_batches
from tests.fake_anthropic_batches import API_KEY, FakeAnthropicBatches
from tests.support import (
    RunningStack,
    chat_records,
    db_rows,
    fresh_database,
    read_jsonl,
    running_stack,
    upload,
    wait_for_batch,
)

PRICE = {"input_per_mtok": 1.0, "output_per_mtok": 5.0}


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeAnthropicBatches]:
    with FakeAnthropicBatches(polls_to_end=2, fail_creates=1) as provider:
        yield provider


@pytest.fixture(scope="module")
def stack(
    db_kind: str, fake: FakeAnthropicBatches, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningStack]:
    tmp: Path = tmp_path_factory.mktemp(f"native-anthropic-{db_kind}")
    doc = {
        "providers": [
            {
                "name": "anthropic-batches",
                "kind": "anthropic",
                "base_url": fake.base_url,
                "api_keys": [API_KEY],
                "batch_api": True,
                "batch_mode": "native",
                "batch_limit": 2,
            }
        ],
        "models": [
            {
                "name": "claude-native",
                "provider": "anthropic-batches",
                "upstream_model": "claude-x",
                "price": PRICE,
            }
        ],
    }
    (tmp / "catalogue.yaml").write_text(yaml.safe_dump(doc))
    with (
        fresh_database(db_kind, tmp) as url,
        running_stack(
            tmp,
            url,
            BATCHGATE_CONFIG=str(tmp / "catalogue.yaml"),
            BATCHGATE_MAINTENANCE_INTERVAL_S="0.2",
            BATCHGATE_NATIVE_POLL_INTERVAL_S="0.2",
            BATCHGATE_NATIVE_POLL_MAX_INTERVAL_S="0.5",
        ) as running,
    ):
        yield running


def records(texts: list[str]) -> list[dict[str, Any]]:
    out = chat_records(len(texts), prefix="anthropic-native")
    for record, text in zip(out, texts, strict=True):
        record["body"] = {
            "model": "claude-native",
            "messages": [{"role": "user", "content": text}],
            "max_tokens": 50,
        }
    return out


def test_an_anthropic_native_batch_is_translated_split_and_mapped_back_in_input_order(
    stack: RunningStack, fake: FakeAnthropicBatches
) -> None:
    client = stack.client()
    texts = ["hello one", "please-error two", "hello three", "please-expire four", "hello five"]
    inputs = records(texts)
    before = len(fake.batches)
    batch = client.batches.create(
        input_file_id=upload(client, inputs).id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    done = wait_for_batch(client, batch.id)
    # the provider expired one request: the batch ends as the provider's batch did
    assert done.status == "expired", done
    assert (done.request_counts.completed, done.request_counts.failed) == (3, 2)

    created = fake.batches[before:]
    # split at the provider's limit (the first create was refused with 529 and came last)
    assert sorted([r["custom_id"] for r in b.requests] for b in created) == [["0", "1"], ["2", "3"], ["4"]]
    sent = next(b for b in created if b.requests[0]["custom_id"] == "0").requests[0]["params"]
    assert sent["model"] == "claude-x" and sent["max_tokens"] == 50
    assert sent["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hello one"}]}]
    assert fake.create_calls >= len(created) + 1  # the first create got 529 and was retried

    output = read_jsonl(client.files.content(done.output_file_id).content)
    assert [line["custom_id"] for line in output] == [inputs[i]["custom_id"] for i in (0, 2, 4)]
    body = output[0]["response"]["body"]
    assert body["object"] == "chat.completion"
    assert body["choices"][0]["message"]["content"] == "echo: hello one"
    errors = read_jsonl(client.files.content(done.error_file_id).content)
    assert [(e["custom_id"], e["error"]["code"]) for e in errors] == [
        (inputs[1]["custom_id"], "invalid_request_error"),
        (inputs[3]["custom_id"], "batch_expired"),
    ]
    assert done.usage.input_tokens == 30 and done.usage.output_tokens == 15
    parts = db_rows(stack.database_url, native_batches.select().where(native_batches.c.batch_id == batch.id))
    assert sorted(p.provider_batch_id for p in parts) == sorted(b.id for b in created)


def test_cancelling_an_anthropic_native_batch_cancels_the_providers(
    stack: RunningStack, fake: FakeAnthropicBatches
) -> None:
    client = stack.client()
    inputs = records(["please-wait a", "please-wait b"])
    before = len(fake.batches)
    batch = client.batches.create(
        input_file_id=upload(client, inputs).id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    deadline = time.monotonic() + 60
    while len(fake.batches) == before:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    client.batches.cancel(batch.id)
    done = wait_for_batch(client, batch.id)
    assert done.status == "cancelled" and done.request_counts.failed == 2
    assert fake.batches[before].cancelled
    errors = read_jsonl(client.files.content(done.error_file_id).content)
    assert [e["error"]["code"] for e in errors] == ["batch_cancelled", "batch_cancelled"]
