"""Inline records of native gRPC creates (`google.protobuf.Value`s) hold what JSON can hold.

A Value's numbers are doubles, so a native client can send NaN or ±Infinity, which JSON has no
spelling for. Such a record used to be stored and sent upstream with `null` in their place; it
is rejected alone now, as a file line holding them is, and the rest of the batch runs.
"""

from __future__ import annotations

import json
import math
from typing import Any

import grpc
import httpx
import pytest
from google.protobuf import struct_pb2

from batchgate.v1 import batches_pb2, batches_pb2_grpc, message_batches_pb2, message_batches_pb2_grpc
from tests.message_batch_support import sdk, wait_ended
from tests.support import RunningStack, read_jsonl, upload, wait_for_batch

ENDPOINT = "/v1/chat/completions"
NOT_FINITE = [math.nan, math.inf, -math.inf]
BODY = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "grpc"}]}


def value(record: dict[str, Any]) -> struct_pb2.Value:
    message = struct_pb2.Value()
    message.struct_value.update(record)
    return message


def chat(custom_id: str, **body: Any) -> dict[str, Any]:
    return {"custom_id": custom_id, "messages": [{"role": "user", "content": f"grpc {custom_id}"}], **body}


def auth(stack: RunningStack) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {stack.key}"),)


def spelled(number: float) -> str:
    return "NaN" if math.isnan(number) else "Infinity" if number > 0 else "-Infinity"


@pytest.mark.parametrize("number", NOT_FINITE, ids=spelled)
@pytest.mark.parametrize("dry_run", [False, True], ids=["create", "dry run"])
def test_a_record_holding_nan_or_infinity_is_rejected_alone(
    shared_stack: RunningStack, number: float, dry_run: bool
) -> None:
    bad = value(chat("not-finite", temperature=number))
    fine = value(chat("finite", temperature=0.5))
    with grpc.insecure_channel(shared_stack.grpc_target) as channel:
        batch = batches_pb2_grpc.BatchServiceStub(channel).CreateBatch(
            batches_pb2.CreateBatchRequest(model="gpt-4o-mini", requests=[fine, bad], dry_run=dry_run),
            metadata=auth(shared_stack),
            timeout=30,
        )
    assert (batch.request_counts.total, batch.rejected_count) == (2, 1)
    [rejected] = batch.rejected_records
    assert (rejected.line, rejected.code) == (2, "invalid_json_line")
    assert rejected.message == (
        f"The line is not valid JSON: 'temperature' is {spelled(number)}, which JSON cannot represent."
    )
    if dry_run:
        return
    client = shared_stack.client()
    # The input file holds the record as sent, as an uploaded line with the number would.
    stored = client.files.content(batch.input_file_id).content.split(b"\n")
    assert f'"temperature": {spelled(number)}'.encode() in stored[1]
    done = wait_for_batch(client, batch.id)
    assert (done.request_counts.completed, done.request_counts.failed) == (1, 1)
    [error] = read_jsonl(client.files.content(done.error_file_id).content)
    assert error["custom_id"] is None and error["error"]["code"] == "invalid_json_line"


def test_only_records_with_such_a_number_are_rejected_and_a_file_line_reads_the_same(
    shared_stack: RunningStack,
) -> None:
    """A number deep in a record counts too; a file line with NaN gets the same rejection."""
    deep = value(chat("deep", tools=[{"type": "function", "function": {"name": "f", "x": [1.5, -math.inf]}}]))
    with grpc.insecure_channel(shared_stack.grpc_target) as channel:
        batch = batches_pb2_grpc.BatchServiceStub(channel).CreateBatch(
            batches_pb2.CreateBatchRequest(
                endpoint=ENDPOINT,
                completion_window="24h",
                requests=[
                    value({"custom_id": "full", "method": "POST", "url": ENDPOINT, "body": BODY}),
                    deep,
                ],
                model="gpt-4o-mini",
                dry_run=True,
            ),
            metadata=auth(shared_stack),
            timeout=30,
        )
    [rejected] = batch.rejected_records
    assert rejected.line == 2 and "'tools[0].function.x[1]' is -Infinity" in rejected.message
    client = shared_stack.client()
    body = {**BODY, "temperature": "__nan__"}
    record = {"custom_id": "nan", "method": "POST", "url": ENDPOINT, "body": body}
    line = json.dumps(record).replace('"__nan__"', "NaN").encode()
    uploaded = upload(client, line + b"\n")
    answer = httpx.post(
        f"{shared_stack.base_url}/batches",
        json={
            "input_file_id": uploaded.id,
            "endpoint": ENDPOINT,
            "completion_window": "24h",
            "dry_run": True,
        },
        headers={"Authorization": f"Bearer {shared_stack.key}"},
        timeout=30,
    )
    assert answer.status_code == 400 and answer.json()["error"]["code"] == "no_valid_records"
    [from_file] = answer.json()["error"]["rejected_records"]
    assert (from_file["code"], from_file["message"]) == (
        "invalid_json_line",
        "The line is not valid JSON: 'body.temperature' is NaN, which JSON cannot represent.",
    )


def test_a_message_batch_request_holding_nan_is_errored_under_its_custom_id(
    shared_stack: RunningStack,
) -> None:
    params = {**BODY, "max_tokens": 16}
    bad = value({"custom_id": "not-finite", "params": {**params, "temperature": math.nan}})
    fine = value({"custom_id": "finite", "params": params})
    with grpc.insecure_channel(shared_stack.grpc_target) as channel:
        batch = message_batches_pb2_grpc.MessageBatchServiceStub(channel).CreateMessageBatch(
            message_batches_pb2.CreateMessageBatchRequest(requests=[bad, fine]),
            metadata=auth(shared_stack),
            timeout=30,
        )
    assert (batch.request_counts.errored, batch.request_counts.processing) == (1, 1)
    client = sdk(shared_stack)
    wait_ended(client, batch.id)
    results = {r.custom_id: r.result for r in client.messages.batches.results(batch.id)}
    assert results["finite"].type == "succeeded"
    refused = results["not-finite"]
    assert refused.type == "errored" and refused.error.error.type == "invalid_request_error"
    assert refused.error.error.message == (
        "The request is not valid JSON: 'params.temperature' is NaN, which JSON cannot represent."
    )
