"""Requests and answers near the gRPC message limit, end to end, on a stack whose limit is the
smallest allowed (2 MiB): three records of 600 KB pass it together.

A lease of long prompts and a group of long answers each used to make one gRPC message past the
limit, refused on every try: the batch never ran (leased in the database, never received), or
never finished (its outcomes, and every later one of that executor, waited behind the group).
A page of large results failed its download with a 413. An answer too large for any message
fails its record, once, naming the setting."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from aiohttp import web

from tests.fake_upstream import Call, FakeUpstream, catalogue
from tests.support import RunningStack, fresh_database, read_jsonl, running_stack, upload, wait_for_batch

MIB = 1024 * 1024
GRPC_MAX = 2 * MIB


class SizedUpstream(FakeUpstream):
    """Answers each call with `x_answer_bytes` characters of content."""

    async def _answer(self, call: Call, body: dict[str, Any]) -> web.Response:
        call.status = 200
        message = {"role": "assistant", "content": "a" * int(body.get("x_answer_bytes", 1))}
        payload = {
            "id": "chatcmpl-sized",
            "object": "chat.completion",
            "created": 1767225600,
            "model": "big",
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
        }
        return web.Response(body=orjson.dumps(payload), content_type="application/json")


@pytest.fixture(scope="module")
def sized() -> Iterator[SizedUpstream]:
    with SizedUpstream(latency_s=0.01) as upstream:
        yield upstream


@pytest.fixture(scope="module")
def stack(
    db_kind: str, sized: SizedUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningStack]:
    tmp: Path = tmp_path_factory.mktemp(f"large-bodies-{db_kind}")
    config = catalogue(tmp / "providers.yaml", {"big": {"base_url": sized.base_url, "api_key": "k"}})
    with (
        fresh_database(db_kind, tmp) as url,
        running_stack(
            tmp,
            url,
            BATCHGATE_CONFIG=config,
            BATCHGATE_GRPC_MAX_MESSAGE_BYTES=str(GRPC_MAX),
            BATCHGATE_MAX_RECORD_BYTES=str(MIB),
        ) as running,
    ):
        yield running


def record(custom_id: str, prompt_bytes: int, answer_bytes: int) -> dict[str, Any]:
    prompt = custom_id + " " + "p" * prompt_bytes
    body = {"model": "big", "messages": [{"role": "user", "content": prompt}], "x_answer_bytes": answer_bytes}
    return {"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions", "body": body}


def calls_of(upstream: FakeUpstream, custom_id: str) -> int:
    return sum(1 for call in upstream.calls() if call.content.split(" ", 1)[0] == custom_id)


def test_long_prompts_and_long_answers_run_in_messages_within_the_limit(
    stack: RunningStack, sized: SizedUpstream
) -> None:
    client = stack.client()
    prefix = f"long-{stack.settings.port}"
    records = [record(f"{prefix}-{i}", 600_000, 600_000) for i in range(6)]
    created = client.batches.create(
        input_file_id=upload(client, records).id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    done = wait_for_batch(client, created.id, timeout_s=90)
    assert (done.status, done.request_counts.completed, done.request_counts.failed) == ("completed", 6, 0)
    assert [calls_of(sized, f"{prefix}-{i}") for i in range(6)] == [1] * 6
    lines = read_jsonl(client.files.content(done.output_file_id).content)
    assert sorted(line["custom_id"] for line in lines) == [f"{prefix}-{i}" for i in range(6)]
    assert {len(line["response"]["body"]["choices"][0]["message"]["content"]) for line in lines} == {600_000}
    # The results endpoint streams them too (one page of 3.6 MB, past the message limit).
    results = httpx.get(
        f"{stack.base_url}/batches/{done.id}/results",
        headers={"Authorization": f"Bearer {stack.key}"},
        timeout=60,
    )
    assert results.status_code == 200, results.text[:500]
    assert len(read_jsonl(results.content)) == 6


def test_an_answer_too_large_for_any_message_fails_its_record_once_naming_the_setting(
    stack: RunningStack, sized: SizedUpstream
) -> None:
    client = stack.client()
    custom_id = f"huge-{stack.settings.port}"
    created = client.batches.create(
        input_file_id=upload(client, [record(custom_id, 10, 3 * MIB), record(f"{custom_id}-ok", 10, 10)]).id,
        endpoint="/v1/chat/completions",
        completion_window="24h",
    )
    done = wait_for_batch(client, created.id, timeout_s=90)
    assert (done.request_counts.completed, done.request_counts.failed) == (1, 1)
    (error,) = read_jsonl(client.files.content(done.error_file_id).content)
    assert error["custom_id"] == custom_id and error["response"] is None
    assert error["error"]["code"] == "response_too_large"
    assert "BATCHGATE_GRPC_MAX_MESSAGE_BYTES" in error["error"]["message"]
    assert calls_of(sized, custom_id) == 1  # not retried: it would answer as much again
