"""Output and error files, the results endpoint, usage and cost, through Envoy with the SDK."""

from __future__ import annotations

import time
from typing import Any

import httpx
import openai
import orjson
import pytest
from openai.types import BatchError
from openai.types.chat import ChatCompletion
from openai.types.shared import ErrorObject

from batchgate.services.common.loading import load_settings
from tests.support import RunningStack, chat_records, jsonl, read_jsonl, upload, wait_for_batch

PRICES = load_settings(environ={})  # the simulated catalogue the stacks run with


def get(stack: RunningStack, path: str, project: str = "default", **params: Any) -> httpx.Response:
    return httpx.get(
        f"{stack.base_url}{path}",
        params=params,
        headers={"Authorization": f"Bearer {stack.keys[project]}"},
        timeout=30,
    )


def simulator_answer(stack: RunningStack, body: dict[str, Any]) -> tuple[int, Any]:
    """What the simulated upstream answers to `body`, asked directly with the bytes batchgate sends."""
    answer = httpx.post(
        f"http://127.0.0.1:{stack.settings.simulator_port}/v1/chat/completions",
        content=orjson.dumps(body),
        headers={"content-type": "application/json"},
        timeout=30,
    )
    return answer.status_code, answer.json()


def create(client: Any, data: bytes | list[dict[str, Any]], **extra: Any) -> Any:
    return client.batches.create(
        input_file_id=upload(client, data).id,
        endpoint="/v1/chat/completions",
        completion_window="24h",
        **extra,
    )


def test_files_hold_what_the_upstream_answered_line_by_line(shared_stack: RunningStack) -> None:
    client = shared_stack.client()
    ok = chat_records(5, prefix="files-ok")
    refused = chat_records(2, prefix="files-400", x_sim={"status": 400})
    broken = chat_records(1, prefix="files-500", x_sim={"status": 500, "retry_after": 0})
    mismatch = chat_records(1, model="gpt-4o", prefix="files-mismatch")
    records = [ok[0], refused[0], ok[1], broken[0], ok[2], ok[3], mismatch[0], refused[1], ok[4]]
    data = jsonl(records) + b'{"custom_id": "files-not-json", "body": \n'
    batch = wait_for_batch(client, create(client, data).id)

    assert batch.status == "completed"
    assert (batch.request_counts.total, batch.request_counts.completed, batch.request_counts.failed) == (
        10,
        5,
        5,
    )
    output = client.files.content(batch.output_file_id).content
    errors = client.files.content(batch.error_file_id).content
    for file_id in (batch.output_file_id, batch.error_file_id):
        assert client.files.retrieve(file_id).purpose == "batch_output"

    output_lines = read_jsonl(output)
    assert [line["custom_id"] for line in output_lines] == [r["custom_id"] for r in ok]
    for line, record in zip(output_lines, ok, strict=True):
        assert line["error"] is None and line["id"].startswith("batch_req_")
        assert line["response"]["status_code"] == 200
        assert line["response"]["request_id"]  # the upstream's x-request-id
        completion = ChatCompletion.model_validate(line["response"]["body"])
        assert completion.choices[0].message.content
        assert (200, line["response"]["body"]) == simulator_answer(shared_stack, record["body"])

    error_lines = read_jsonl(errors)
    expected_failures = [refused[0], broken[0], mismatch[0], refused[1], None]
    assert [line["custom_id"] for line in error_lines] == [
        r["custom_id"] if r else None for r in expected_failures
    ]
    for line, record in zip(error_lines, expected_failures, strict=True):
        assert line["id"].startswith("batch_req_")
        if record is not None and "x_sim" in record["body"]:
            # Upstream HTTP failure: the upstream's answer under response, and error null.
            assert line["error"] is None
            status, body = simulator_answer(shared_stack, record["body"])
            assert (line["response"]["status_code"], line["response"]["body"]) == (status, body)
            assert status == record["body"]["x_sim"]["status"]
            assert ErrorObject.model_validate(line["response"]["body"]["error"]).code == f"sim_{status}"
        else:
            # Rejected at create: no response, an error object.
            assert line["response"] is None
            error = BatchError.model_validate(line["error"])
            assert error.code == ("model_mismatch" if record else "invalid_json_line") and error.message

    assert len({line["id"] for line in output_lines + error_lines}) == 10
    # The results endpoint streams the same lines: all of them, or one outcome.
    succeeded = get(shared_stack, f"/batches/{batch.id}/results", state="succeeded")
    assert succeeded.headers["content-type"].startswith("application/jsonl")
    assert succeeded.content == output
    assert get(shared_stack, f"/batches/{batch.id}/results", state="failed").content == errors
    everything = read_jsonl(get(shared_stack, f"/batches/{batch.id}/results").content)
    assert sorted(everything, key=lambda x: x["id"]) == sorted(
        output_lines + error_lines, key=lambda x: x["id"]
    )
    assert [x["custom_id"] for x in everything] == [r["custom_id"] for r in records] + [None]


def test_a_batch_where_every_item_failed_is_completed_with_only_an_error_file(
    shared_stack: RunningStack,
) -> None:
    client = shared_stack.client()
    records = chat_records(3, prefix="all-failed", x_sim={"status": 422})
    batch = wait_for_batch(client, create(client, records).id)
    assert batch.status == "completed"
    assert batch.output_file_id is None and batch.error_file_id
    assert (batch.request_counts.completed, batch.request_counts.failed) == (0, 3)
    lines = read_jsonl(client.files.content(batch.error_file_id).content)
    assert [line["response"]["status_code"] for line in lines] == [422, 422, 422]
    assert all(line["error"] is None for line in lines)


def test_partial_results_and_live_usage_while_the_batch_runs(shared_stack: RunningStack) -> None:
    client = shared_stack.client()
    fast = chat_records(4, prefix="partial-fast")
    slow = chat_records(2, prefix="partial-slow", x_sim={"delay_ms": 6000})
    batch = create(client, [fast[0], slow[0], fast[1], fast[2], slow[1], fast[3]])

    deadline = time.monotonic() + 60
    while (running := client.batches.retrieve(batch.id)).request_counts.completed < 4:
        assert time.monotonic() < deadline, running.request_counts
        time.sleep(0.05)
    if running.status == "in_progress":  # the slow ones are still running (the usual case)
        assert running.usage.input_tokens > 0 and running.usage.output_tokens > 0
        assert running.usage.total_tokens == running.usage.input_tokens + running.usage.output_tokens
        assert running.model_extra["cost"]["amount"] > 0
        answer = get(shared_stack, f"/batches/{batch.id}/results")
        assert answer.status_code == 409 and answer.json()["error"]["code"] == "batch_not_finished"
        # The README's way with the SDK.
        partial = client.get(
            f"/batches/{batch.id}/results", cast_to=httpx.Response, options={"params": {"partial": "true"}}
        )
        lines = read_jsonl(partial.text)
        assert [x["custom_id"] for x in lines] == [r["custom_id"] for r in fast]
        assert (
            read_jsonl(
                get(shared_stack, f"/batches/{batch.id}/results", partial="true", state="failed").content
            )
            == []
        )
    done = wait_for_batch(client, batch.id)
    assert done.status == "completed" and done.request_counts.completed == 6
    assert len(read_jsonl(get(shared_stack, f"/batches/{batch.id}/results").content)) == 6


def test_results_endpoint_refuses_bad_filters_and_other_projects(shared_stack: RunningStack) -> None:
    client = shared_stack.client()
    batch = wait_for_batch(client, create(client, chat_records(1, prefix="results-scope")).id)
    bad = get(shared_stack, f"/batches/{batch.id}/results", state="sideways")
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "state"
    assert get(shared_stack, f"/batches/{batch.id}/results", project="other").status_code == 404
    assert get(shared_stack, "/batches/batch_nope/results").status_code == 404


def _expected_cost(model: str, usage: dict[str, Any], discount: float) -> float:
    price = PRICES.model(model).price
    cached = usage.get("prompt_tokens_details", {}).get("cached_tokens", 0)
    gross = (
        (usage["prompt_tokens"] - cached) * price.input_per_mtok
        + cached * (price.cached_input_per_mtok or price.input_per_mtok)
        + usage["completion_tokens"] * price.output_per_mtok
    ) / 1e6
    return gross * (1 - discount)


def test_usage_and_cost_add_up_per_item_batch_and_group(shared_stack: RunningStack) -> None:
    client = shared_stack.client()
    started = int(time.time())
    standard = create(client, chat_records(8, prefix="usage-mini"))
    expedited = create(
        client, chat_records(4, model="gpt-4o", prefix="usage-4o"), extra_body={"priority": "expedited"}
    )
    batches = {b.id: wait_for_batch(client, b.id) for b in (standard, expedited)}

    per_item: dict[str, dict[str, Any]] = {}
    for batch_id, discount in ((standard.id, 0.5), (expedited.id, 0.0)):
        batch = batches[batch_id]
        assert batch.model_extra["cost"]["discount"] == discount
        lines = read_jsonl(client.files.content(batch.output_file_id).content)
        usages = [line["response"]["body"]["usage"] for line in lines]
        assert batch.usage.input_tokens == sum(u["prompt_tokens"] for u in usages)
        assert batch.usage.output_tokens == sum(u["completion_tokens"] for u in usages)
        assert batch.usage.total_tokens == sum(u["total_tokens"] for u in usages)
        cost = sum(_expected_cost(batch.model, u, discount) for u in usages)
        assert batch.model_extra["cost"]["amount"] == pytest.approx(cost, rel=1e-9)
        for line, usage in zip(lines, usages, strict=True):
            per_item[line["custom_id"]] = {
                "usage": usage,
                "cost": _expected_cost(batch.model, usage, discount),
            }

        (group,) = get(shared_stack, "/usage", batch_id=batch_id).json()["data"]
        assert group["object"] == "usage.group" and group["batch_id"] is None and group["model"] is None
        assert group["requests"] == batch.request_counts.total
        assert (group["input_tokens"], group["output_tokens"], group["total_tokens"]) == (
            batch.usage.input_tokens,
            batch.usage.output_tokens,
            batch.usage.total_tokens,
        )
        assert group["cost"] == {"currency": "usd", "amount": pytest.approx(cost, rel=1e-9)}

    for name in ("model", "api_key_id"):  # a filter no row can match is a 400, never a 500
        refused = get(shared_stack, "/usage", **{name: "a\x00b"})
        assert refused.status_code == 400 and refused.json()["error"]["param"] == name, refused.text

    groups = get(shared_stack, "/usage", start_time=started, group_by="batch_id,model").json()["data"]
    mine = {(g["batch_id"], g["model"]): g for g in groups if g["batch_id"] in batches}
    assert set(mine) == {(standard.id, "gpt-4o-mini"), (expedited.id, "gpt-4o")}
    assert mine[(expedited.id, "gpt-4o")]["requests"] == 4
    by_model = get(shared_stack, "/usage", batch_id=standard.id, group_by=["model", "api_key_id"]).json()
    assert [(g["model"], g["api_key_id"] is not None) for g in by_model["data"]] == [("gpt-4o-mini", True)]

    # The events: one per item, paged, each with the item's own usage and cost.
    seen: list[dict[str, Any]] = []
    after: str | None = None
    while True:
        page = get(
            shared_stack,
            "/usage/events",
            batch_id=standard.id,
            limit=3,
            **({"after": after} if after else {}),
        ).json()
        seen += page["data"]
        if not page["has_more"]:
            break
        after = page["last_id"]
    assert len(seen) == 8 and len({e["id"] for e in seen}) == 8
    for event in seen:
        item = per_item[event["custom_id"]]
        assert event["object"] == "usage.event" and event["source"] == "batch"
        assert event["batch_id"] == standard.id and event["model"] == "gpt-4o-mini"
        assert (event["input_tokens"], event["output_tokens"]) == (
            item["usage"]["prompt_tokens"],
            item["usage"]["completion_tokens"],
        )
        assert event["cost"]["amount"] == pytest.approx(item["cost"], rel=1e-9)
        assert event["created_at"] >= started - 1

    # Another project sees none of it.
    assert get(shared_stack, "/usage", project="other", batch_id=standard.id).status_code == 404
    theirs = get(shared_stack, "/usage", project="other", start_time=started, group_by="batch_id").json()[
        "data"
    ]
    assert not {g["batch_id"] for g in theirs} & set(batches)


@pytest.mark.parametrize(
    "params, param",
    [
        ({"group_by": "colour"}, "group_by"),
        ({"start_time": 200, "end_time": 100}, "end_time"),
    ],
)
def test_usage_refuses_bad_queries(shared_stack: RunningStack, params: dict[str, Any], param: str) -> None:
    answer = get(shared_stack, "/usage", **params)
    assert answer.status_code == 400 and answer.json()["error"]["param"] == param
    events = get(shared_stack, "/usage/events", after="evt_1")
    assert events.status_code == 400 and events.json()["error"]["param"] == "after"


def test_sdk_sees_404_for_results_of_an_unknown_batch(shared_stack: RunningStack) -> None:
    client = shared_stack.client()
    with pytest.raises(openai.NotFoundError):
        client.get("/batches/batch_unknown/results", cast_to=httpx.Response)


def test_every_line_stays_one_line_for_splitlines(shared_stack: RunningStack) -> None:
    """U+0085, U+2028 and U+2029 in ids, prompts and answers are escaped in every file we write,
    so `text.splitlines()` (what many users read JSONL with) sees one record per line."""
    client = shared_stack.client()
    odd = "a\u2028b\u2029c\x85d"
    records = chat_records(2, prefix=f"breaks{odd}", x_sim={"echo": True})
    records[1]["body"]["model"] = f"no-such-model{odd}"  # rejected at create
    for record in records:
        record["body"]["messages"][0]["content"] = f"say {odd}"
    created = client.batches.create(
        input_file_id=openai.NOT_GIVEN,  # inline requests instead
        extra_body={"requests": records},
        endpoint="/v1/chat/completions",
        completion_window="24h",
    )
    batch = wait_for_batch(client, created.id)
    files = {  # name: (file, its custom_ids)
        "output": (batch.output_file_id, [f"breaks{odd}-0"]),
        "error": (batch.error_file_id, [f"breaks{odd}-1"]),
        "rejections": (created.model_extra["rejected_records_file_id"], [f"breaks{odd}-1"]),
        "inline input": (batch.input_file_id, [f"breaks{odd}-0", f"breaks{odd}-1"]),
    }
    for name, (file_id, custom_ids) in files.items():
        text = client.files.content(file_id).text
        assert [orjson.loads(line)["custom_id"] for line in text.splitlines()] == custom_ids, (name, text)
    (output,) = read_jsonl(client.files.content(batch.output_file_id).content)
    assert odd in output["response"]["body"]["choices"][0]["message"]["content"]  # the echo, intact


def test_usage_events_page_after_an_event_id_only_as_it_is_spelled(shared_stack: RunningStack) -> None:
    """`after` names an event as its `id` spells it: other digits than ASCII ones, leading
    zeros and numbers past the id column's range are ids of no event (400, never a 500 when
    SQLite or PostgreSQL cannot take the number)."""
    client = shared_stack.client()
    batch = create(client, chat_records(1, prefix="after-spelling"))
    wait_for_batch(client, batch.id)
    [event] = get(shared_stack, "/usage/events", batch_id=batch.id).json()["data"]
    number = event["id"].removeprefix("usage_")
    assert get(shared_stack, "/usage/events", batch_id=batch.id, after=event["id"]).json()["data"] == []
    arabic_indic = number.translate({ord("0") + d: 0x0660 + d for d in range(10)})
    for after in (
        f"usage_0{number}",
        f"usage_{arabic_indic}",
        "usage_\u00b2",  # superscript two: str.isdigit() says yes, int() says no
        "usage_9223372036854775808",  # past SQLite's 64-bit integers
        "usage_" + "9" * 5000,  # past Python's int() of a string
    ):
        answer = get(shared_stack, "/usage/events", after=after)
        assert answer.status_code == 400, (after[:40], answer.text)
        assert (answer.json()["error"]["code"], answer.json()["error"]["param"]) == ("invalid_after", "after")
