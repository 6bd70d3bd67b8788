"""The `anthropic` SDK, unchanged, drives Message Batches through Envoy and every service.

`claude-haiku-4-5` runs on the simulator's Anthropic Messages API (natively: the params go as
they are), `gpt-4o-mini` on its OpenAI-compatible API (translated both ways), so one batch
may use both.
"""

from __future__ import annotations

import json
import socket
import time
from typing import Any

import anthropic
import grpc
import httpx
import pytest

from batchgate.services.common import proto_values as pv
from batchgate.v1 import message_batches_pb2 as mb
from batchgate.v1 import message_batches_pb2_grpc
from tests.message_batch_support import NATIVE, TERMINAL_WAIT_S, TRANSLATED, params, sdk, wait_ended
from tests.support import RunningStack, add_project, read_jsonl


def counts_of(batch: Any) -> dict[str, int]:
    return batch.request_counts.model_dump()


def test_a_batch_runs_natively_and_translated_and_its_results_parse(shared_stack: RunningStack) -> None:
    client = sdk(shared_stack)
    requests = [
        {"custom_id": "native-1", "params": params(NATIVE, "native one", system="Be brief.")},
        {"custom_id": "translated-1", "params": params(TRANSLATED, "translated one", stop_sequences=["END"])},
        {"custom_id": "translated-2", "params": params(TRANSLATED, "translated two", temperature=0.2)},
        # holds the batch in progress long enough to be read while it runs
        {"custom_id": "slow", "params": params(NATIVE, "slow one", x_sim={"delay_ms": 5000})},
        {
            "custom_id": "upstream-400",
            "params": params(NATIVE, "bad one", x_sim={"status": 400, "times": 99}),
        },
        {"custom_id": "streaming", "params": params(NATIVE, "refused", stream=True)},
        {"custom_id": "thinking", "params": params(TRANSLATED, "refused", thinking={"type": "enabled"})},
    ]
    batch = client.messages.batches.create(requests=requests)
    assert batch.id.startswith("msgbatch_") and batch.type == "message_batch"
    assert batch.processing_status == "in_progress"
    assert batch.results_url is None and batch.ended_at is None and batch.cancel_initiated_at is None
    assert batch.expires_at.timestamp() - batch.created_at.timestamp() == pytest.approx(86400, abs=1)
    assert sum(counts_of(batch).values()) == len(requests)
    assert batch.request_counts.errored == 2  # refused at create, each on its own

    running = client.messages.batches.retrieve(batch.id)
    assert running.processing_status == "in_progress" and running.request_counts.processing >= 1
    assert sum(counts_of(running).values()) == len(requests)

    done = wait_ended(client, batch.id)
    assert counts_of(done) == {"processing": 0, "succeeded": 4, "errored": 3, "canceled": 0, "expired": 0}
    assert done.ended_at is not None and done.ended_at >= done.created_at
    assert done.results_url == f"{shared_stack.base_url}/messages/batches/{batch.id}/results"

    results = {r.custom_id: r.result for r in client.messages.batches.results(batch.id)}
    assert set(results) == {r["custom_id"] for r in requests}
    native = results["native-1"]
    assert native.type == "succeeded" and native.message.type == "message"
    assert native.message.model == NATIVE and native.message.content[0].type == "text"
    assert native.message.usage.input_tokens > 0
    translated = results["translated-1"]
    assert translated.type == "succeeded" and translated.message.role == "assistant"
    assert translated.message.model == TRANSLATED  # each request runs on its own model's upstream
    assert "translated one" in translated.message.content[0].text
    assert translated.message.stop_reason in ("end_turn", "max_tokens", "stop_sequence")
    upstream = results["upstream-400"]
    assert upstream.type == "errored" and upstream.error.error.type == "invalid_request_error"
    for refused, words in (("streaming", "stream"), ("thinking", "thinking")):
        result = results[refused]
        assert result.type == "errored" and result.error.error.type == "invalid_request_error"
        assert words in result.error.error.message


def test_results_are_jsonl_with_newline_endings_for_curl_users(shared_stack: RunningStack) -> None:
    client = sdk(shared_stack)
    batch = client.messages.batches.create(
        requests=[{"custom_id": f"c{i}", "params": params(TRANSLATED, f"curl {i}")} for i in range(3)]
    )
    done = wait_ended(client, batch.id)
    answer = httpx.get(done.results_url, headers={"x-api-key": shared_stack.key}, timeout=30)
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("application/x-jsonl")
    assert answer.content.endswith(b"\n") and b"\r" not in answer.content
    lines = answer.content.split(b"\n")[:-1]
    assert [httpx.Response(200, content=line).json()["custom_id"] for line in lines] == ["c0", "c1", "c2"]


def test_list_pages_both_ways(shared_stack: RunningStack) -> None:
    client = sdk(shared_stack, "other")
    made = [
        client.messages.batches.create(
            requests=[{"custom_id": "x", "params": params(TRANSLATED, f"list {i}")}]
        ).id
        for i in range(5)
    ]
    newest_first = made[::-1]
    first = client.messages.batches.list(limit=2)
    assert [b.id for b in first.data] == newest_first[:2]
    assert first.has_more and first.first_id == newest_first[0] and first.last_id == newest_first[1]
    second = client.messages.batches.list(limit=2, after_id=first.last_id)
    assert [b.id for b in second.data] == newest_first[2:4]
    back = client.messages.batches.list(limit=2, before_id=second.first_id)
    assert [b.id for b in back.data] == newest_first[:2] and not back.has_more
    mid = client.messages.batches.list(limit=2, before_id=newest_first[4])
    assert [b.id for b in mid.data] == newest_first[2:4] and mid.has_more
    every = [b.id for b in client.messages.batches.list(limit=2)]  # the SDK's auto-paging
    assert every[:5] == newest_first
    mine = {b.id for b in sdk(shared_stack).messages.batches.list(limit=1000).data}
    assert not mine & set(made)  # another project's batches are not listed


def test_cancel_then_delete_and_the_openai_routes_never_see_it(shared_stack: RunningStack) -> None:
    client = sdk(shared_stack)
    slow = [
        {"custom_id": f"s{i}", "params": params(NATIVE, f"cancel {i}", x_sim={"delay_ms": 3000})}
        for i in range(400)
    ]
    batch = client.messages.batches.create(requests=slow)
    with pytest.raises(anthropic.BadRequestError) as running:
        client.messages.batches.delete(batch.id)
    assert running.value.body["error"]["type"] == "invalid_request_error"
    assert "still processing" in running.value.body["error"]["message"]

    openai_view = httpx.get(
        f"{shared_stack.base_url}/batches/{batch.id}", headers={"authorization": f"Bearer {shared_stack.key}"}
    )
    assert openai_view.status_code == 404 and openai_view.json()["error"]["code"] == "not_found"

    canceling = client.messages.batches.cancel(batch.id)
    assert canceling.processing_status in ("canceling", "ended")
    assert canceling.cancel_initiated_at is not None
    again = client.messages.batches.cancel(batch.id)  # a retried cancel answers the batch
    assert again.id == batch.id
    done = wait_ended(client, batch.id)
    counts = counts_of(done)
    assert counts["canceled"] > 0 and counts["processing"] == 0 and sum(counts.values()) == len(slow)
    kinds = {r.result.type for r in client.messages.batches.results(batch.id)}
    assert "canceled" in kinds and kinds <= {"canceled", "succeeded", "errored"}

    deleted = client.messages.batches.delete(batch.id)
    assert deleted.id == batch.id and deleted.type == "message_batch_deleted"
    with pytest.raises(anthropic.NotFoundError) as gone:
        client.messages.batches.retrieve(batch.id)
    assert gone.value.body["error"]["type"] == "not_found_error"
    assert batch.id not in {b.id for b in client.messages.batches.list(limit=1000).data}


def _raw(stack: RunningStack, method: str, path: str, **kwargs: Any) -> httpx.Response:
    headers = {"x-api-key": stack.key, "anthropic-version": "2023-06-01", **kwargs.pop("headers", {})}
    return httpx.request(method, f"{stack.base_url}{path}", headers=headers, timeout=30, **kwargs)


def _announce_body(stack: RunningStack, length: int) -> tuple[int, bytes]:
    """Send a create's headers announcing a body of `length` bytes (none follows): the answer
    comes before any body is read."""
    head = (
        f"POST /v1/messages/batches HTTP/1.1\r\nHost: 127.0.0.1\r\nx-api-key: {stack.key}\r\n"
        f"content-type: application/json\r\ncontent-length: {length}\r\nconnection: close\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", stack.settings.port), timeout=30) as conn:
        conn.sendall(head.encode())
        received = b""
        while chunk := conn.recv(65536):
            received += chunk
    status_line, _, rest = received.partition(b"\r\n")
    headers, _, body = rest.partition(b"\r\n\r\n")
    if b"transfer-encoding: chunked" in headers.lower():
        size, _, data = body.partition(b"\r\n")
        body = data[: int(size, 16)]
    return int(status_line.split()[1]), body


def _error_type(answer: httpx.Response) -> str:
    body = answer.json()
    assert body["type"] == "error" and set(body["error"]) >= {"type", "message"}, body
    return str(body["error"]["type"])


def test_every_error_is_in_anthropics_envelope(shared_stack: RunningStack) -> None:
    client = sdk(shared_stack)
    with pytest.raises(anthropic.AuthenticationError) as bad_key:
        sdk(shared_stack).with_options(api_key="bg-wrong").messages.batches.list()
    assert bad_key.value.body["error"]["type"] == "authentication_error"
    no_key = httpx.get(f"{shared_stack.base_url}/messages/batches", timeout=10)
    assert no_key.status_code == 401 and _error_type(no_key) == "authentication_error"
    assert "x-api-key" in no_key.json()["error"]["message"]  # how the Anthropic SDK sends it
    bearer = httpx.get(
        f"{shared_stack.base_url}/messages/batches",
        headers={"authorization": f"Bearer {shared_stack.key}", "anthropic-version": "2099-01-01"},
        timeout=10,
    )
    assert bearer.status_code == 200 and "data" in bearer.json()

    with pytest.raises(anthropic.NotFoundError) as unknown:
        client.messages.batches.retrieve("msgbatch_nope")
    assert unknown.value.body["error"]["type"] == "not_found_error"
    unrouted = _raw(shared_stack, "GET", "/messages/batches/x/nothing")
    assert unrouted.status_code == 404 and _error_type(unrouted) == "not_found_error"

    with pytest.raises(anthropic.BadRequestError) as empty:
        client.messages.batches.create(requests=[])
    assert empty.value.body["error"]["type"] == "invalid_request_error"
    for query in ("limit=0", "limit=1001", "after_id=msgbatch_nope"):
        answer = _raw(shared_stack, "GET", f"/messages/batches?{query}")
        assert answer.status_code == 400 and _error_type(answer) == "invalid_request_error", query
    not_json = _raw(
        shared_stack, "POST", "/messages/batches", content=b"{", headers={"content-type": "application/json"}
    )
    assert not_json.status_code == 400 and _error_type(not_json) == "invalid_request_error"
    none_valid = _raw(
        shared_stack, "POST", "/messages/batches", json={"requests": [{"custom_id": "bad id!", "params": {}}]}
    )
    assert none_valid.status_code == 400 and _error_type(none_valid) == "invalid_request_error"
    assert none_valid.json()["error"]["rejected_records"][0]["code"] == "invalid_custom_id"

    add_project(shared_stack, "message-batches-broke", budget_usd=0.0)
    with pytest.raises(anthropic.APIStatusError) as broke:
        sdk(shared_stack, "message-batches-broke").messages.batches.create(
            requests=[{"custom_id": "b", "params": params(NATIVE, "no budget")}]
        )
    assert broke.value.status_code == 402 and broke.value.body["error"]["type"] == "billing_error"

    running = client.messages.batches.create(
        requests=[{"custom_id": "r", "params": params(NATIVE, "conflict", x_sim={"delay_ms": 5000})}]
    )
    early = _raw(shared_stack, "GET", f"/messages/batches/{running.id}/results")
    assert early.status_code == 409 and _error_type(early) == "conflict_error"

    status, body = _announce_body(shared_stack, shared_stack.settings.message_batch_max_bytes * 2)
    assert status == 413 and _error_type(httpx.Response(status, content=body)) == "request_too_large"

    openai_route = httpx.get(
        f"{shared_stack.base_url}/batches/batch_nope", headers={"x-api-key": shared_stack.key}
    )
    assert (
        openai_route.status_code == 404
        and "error" in openai_route.json()
        and "type" not in openai_route.json()
    )


def test_the_native_grpc_methods_through_envoy(shared_stack: RunningStack) -> None:
    metadata = (("x-api-key", shared_stack.key),)
    request = {"custom_id": "g1", "params": params(TRANSLATED, "over gRPC")}
    with grpc.insecure_channel(shared_stack.grpc_target) as channel:
        batches = message_batches_pb2_grpc.MessageBatchServiceStub(channel)
        results = message_batches_pb2_grpc.MessageBatchResultsServiceStub(channel)
        create = mb.CreateMessageBatchRequest(requests=[pv.from_python(request)])
        batch = batches.CreateMessageBatch(create, metadata=metadata, timeout=30)
        assert batch.id.startswith("msgbatch_") and batch.request_counts.processing == 1
        deadline = time.monotonic() + TERMINAL_WAIT_S
        while batch.processing_status != "ended":
            assert time.monotonic() < deadline, batch
            time.sleep(0.1)
            get = mb.GetMessageBatchRequest(message_batch_id=batch.id)
            batch = batches.GetMessageBatch(get, metadata=metadata, timeout=10)
        assert batch.results_url.string_value.endswith(f"/v1/messages/batches/{batch.id}/results")
        page = batches.ListMessageBatches(
            mb.ListMessageBatchesRequest(limit=1), metadata=metadata, timeout=10
        )
        assert [b.id for b in page.data] == [batch.id] and page.last_id.string_value == batch.id
        ask = mb.GetMessageBatchResultsRequest(message_batch_id=batch.id)
        data = b"".join(
            part.data for part in results.GetMessageBatchResults(ask, metadata=metadata, timeout=30)
        )
        assert [line["result"]["type"] for line in read_jsonl(data)] == ["succeeded"]
        delete = mb.DeleteMessageBatchRequest(message_batch_id=batch.id)
        assert (
            batches.DeleteMessageBatch(delete, metadata=metadata, timeout=10).type == "message_batch_deleted"
        )
        with pytest.raises(grpc.RpcError) as gone:
            batches.GetMessageBatch(mb.GetMessageBatchRequest(message_batch_id=batch.id), metadata=metadata)
    assert gone.value.code() == grpc.StatusCode.NOT_FOUND
    trailers = dict(gone.value.trailing_metadata())
    assert json.loads(trailers["x-oai-error"])["error"]["type"] == "not_found_error"


def test_a_message_batch_is_found_only_by_its_project_through_its_own_api(shared_stack: RunningStack) -> None:
    owner = sdk(shared_stack)
    batch = owner.messages.batches.create(requests=[{"custom_id": "o", "params": params(TRANSLATED, "mine")}])
    wait_ended(owner, batch.id)
    stranger = sdk(shared_stack, "other")
    for call in (
        stranger.messages.batches.retrieve,
        stranger.messages.batches.cancel,
        stranger.messages.batches.delete,
        stranger.messages.batches.results,  # reads the batch first: 404 there
    ):
        with pytest.raises(anthropic.NotFoundError) as caught:
            call(batch.id)
        assert caught.value.body["error"]["type"] == "not_found_error"
    stolen = httpx.get(
        f"{shared_stack.base_url}/messages/batches/{batch.id}/results",
        headers={"x-api-key": shared_stack.keys["other"]},
    )
    assert stolen.status_code == 404 and _error_type(stolen) == "not_found_error"
    assert owner.messages.batches.retrieve(batch.id).processing_status == "ended"
    bearer = {"authorization": f"Bearer {shared_stack.key}"}
    listed = httpx.get(f"{shared_stack.base_url}/batches?limit=100", headers=bearer, timeout=10).json()
    assert not [b["id"] for b in listed["data"] if b["id"].startswith("msgbatch_")]
    openai_results = httpx.get(
        f"{shared_stack.base_url}/batches/{batch.id}/results", headers=bearer, timeout=10
    )
    assert openai_results.status_code == 404 and "error" in openai_results.json()
    deliveries = httpx.get(f"{shared_stack.base_url}/batches/{batch.id}/webhook_deliveries", headers=bearer)
    assert deliveries.status_code == 404


def test_an_idempotency_key_answers_a_repeated_create_with_the_first_batch(
    shared_stack: RunningStack,
) -> None:
    client = sdk(shared_stack)
    requests = [{"custom_id": "i", "params": params(TRANSLATED, "once")}]
    key = {"Idempotency-Key": f"msg-{time.time_ns()}"}
    first = client.messages.batches.create(requests=requests, extra_headers=key)
    again = client.messages.batches.create(requests=requests, extra_headers=key)
    assert again.id == first.id
    changed = [{"custom_id": "i", "params": params(TRANSLATED, "twice")}]
    with pytest.raises(anthropic.APIStatusError) as reused:
        client.messages.batches.create(requests=changed, extra_headers=key)
    assert reused.value.status_code == 422 and reused.value.body["error"]["type"] == "invalid_request_error"


def test_a_request_refused_for_its_custom_id_keeps_it_in_its_result(shared_stack: RunningStack) -> None:
    client = sdk(shared_stack)
    sent: list[Any] = ["ok", "x" * 65, "has space", 123, "", "y" * 600, "nul\x00"]
    requests: Any = [{"custom_id": c, "params": params(TRANSLATED, "id")} for c in sent]
    requests.append({"custom_id": "negative", "params": params(TRANSLATED, "id", max_tokens=-1)})
    batch = client.messages.batches.create(requests=requests)
    wait_ended(client, batch.id)
    kept = ["ok", "x" * 65, "has space", "123", "", "y" * 509 + "...", "nul\ufffd", "negative"]
    results = list(client.messages.batches.results(batch.id))
    assert [r.custom_id for r in results] == kept
    assert [r.result.type for r in results] == ["succeeded"] + ["errored"] * 7
    messages = [r.result.error.error.message for r in results[1:] if r.result.type == "errored"]
    assert "'custom_id' is empty" in messages[3] and "no 'custom_id'" not in messages[3]
    assert "'params.max_tokens' is -1; it must be at least 1" in messages[-1]
    raw = _raw(shared_stack, "GET", f"/messages/batches/{batch.id}/results")
    assert [
        httpx.Response(200, content=line).json()["custom_id"] for line in raw.content.splitlines()
    ] == kept

    none_run = _raw(shared_stack, "POST", "/messages/batches", json={"requests": requests[1:4]})
    assert none_run.status_code == 400
    assert [r["custom_id"] for r in none_run.json()["error"]["rejected_records"]] == kept[1:4]


def test_a_deleted_message_batch_keeps_its_usage_for_its_project(shared_stack: RunningStack) -> None:
    client = sdk(shared_stack)
    batch = client.messages.batches.create(
        requests=[{"custom_id": "u", "params": params(TRANSLATED, "bill")}]
    )
    wait_ended(client, batch.id)
    client.messages.batches.delete(batch.id)

    def usage(path: str, project: str = "default") -> httpx.Response:
        headers = {"authorization": f"Bearer {shared_stack.keys[project]}"}
        return httpx.get(f"{shared_stack.base_url}{path}", headers=headers, timeout=10)

    sums = usage(f"/usage?batch_id={batch.id}")
    assert sums.status_code == 200 and [g["requests"] for g in sums.json()["data"]] == [1]
    events = usage(f"/usage/events?batch_id={batch.id}")
    assert events.status_code == 200 and [e["batch_id"] for e in events.json()["data"]] == [batch.id]
    for path, project in (
        (f"/usage?batch_id={batch.id}", "other"),
        ("/usage?batch_id=msgbatch_never", "default"),
    ):
        assert usage(path, project).status_code == 404, (path, project)


def test_a_replayed_create_answers_with_idempotent_replayed(shared_stack: RunningStack) -> None:
    """`Idempotency-Key` works as for POST /v1/batches, whose replay says so in a header."""
    client = sdk(shared_stack)
    requests: Any = [{"custom_id": "r", "params": params(TRANSLATED, "replayed")}]
    key = {"Idempotency-Key": f"msg-replay-{time.time_ns()}"}
    first = client.messages.batches.with_raw_response.create(requests=requests, extra_headers=key)
    assert "idempotent-replayed" not in first.headers
    again = client.messages.batches.with_raw_response.create(requests=requests, extra_headers=key)
    assert again.headers.get("idempotent-replayed") == "true"
    assert again.parse().id == first.parse().id
    other = client.messages.batches.with_raw_response.create(requests=requests)  # no key: a new batch
    assert "idempotent-replayed" not in other.headers and other.parse().id != first.parse().id
