"""GET /v1/batches/{id}/results?format=merged|simple: every item in input order, with the
request beside its outcome (merged) or just the answer's content or error (simple); the
credentials of tool and workflow records are never echoed."""

from __future__ import annotations

import time
import uuid
from typing import Any

import httpx
import openai
import pytest

from tests.e2e.test_keys_and_budgets import cli, new_key
from tests.support import RunningStack, chat_records, read_jsonl, run_cli, upload, wait_for_batch
from tests.tool_servers import HttpToolServer
from tests.workflow_servers import WorkflowCallbackServer

TOOL_TOKEN = "merged-tool-secret-7f3e"
WORKFLOW_TOKEN = "merged-workflow-secret-2b9d"
TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]


def results(stack: RunningStack, batch_id: str, project: str = "default", **params: str) -> httpx.Response:
    return httpx.get(
        f"{stack.base_url}/batches/{batch_id}/results",
        params=params,
        headers={"Authorization": f"Bearer {stack.keys[project]}"},
        timeout=60,
    )


def mixed_batch(client: Any) -> tuple[Any, list[dict[str, Any]]]:
    """Six records: 0, 2, 5 succeed; 1 fails upstream (HTTP 400); 3 is rejected at create (no
    model); 4 succeeds. Failures sit between successes, so order is visible."""
    records = chat_records(6, prefix=f"formats-{time.time_ns()}")
    records[1]["body"]["x_sim"] = {"status": 400}
    del records[3]["body"]["model"]
    batch = client.batches.create(
        input_file_id=upload(client, records).id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    done = wait_for_batch(client, batch.id)
    assert (done.request_counts.completed, done.request_counts.failed) == (4, 2)
    return done, records


def test_merged_and_simple_results_keep_input_order(shared_stack: RunningStack) -> None:
    client = shared_stack.client()
    done, records = mixed_batch(client)
    plain = {line["custom_id"]: line for line in read_jsonl(results(shared_stack, done.id).content)}

    merged = read_jsonl(results(shared_stack, done.id, format="merged").content)
    assert [m["custom_id"] for m in merged] == [r["custom_id"] for r in records]
    for record, line in zip(records, merged, strict=True):
        expected_body = None if record["custom_id"].endswith("-3") else record["body"]
        assert line["body"] == expected_body
        assert {k: v for k, v in line.items() if k != "body"} == plain[record["custom_id"]]
    assert merged[1]["response"]["status_code"] == 400 and merged[3]["error"]["code"] == "missing_model"

    simple = read_jsonl(results(shared_stack, done.id, format="simple").content)
    assert [s["custom_id"] for s in simple] == [r["custom_id"] for r in records]
    for line in simple:
        answer = plain[line["custom_id"]]
        if answer["error"] is None and answer["response"]["status_code"] == 200:
            assert set(line) == {"custom_id", "content"}
            assert line["content"] == answer["response"]["body"]["choices"][0]["message"]["content"]
            assert isinstance(line["content"], str) and line["content"]
        else:
            assert set(line) == {"custom_id", "error"}
    assert simple[1]["error"]["code"] == "sim_400" and simple[1]["error"]["message"]
    assert simple[3]["error"]["code"] == "missing_model"

    only_failed = read_jsonl(results(shared_stack, done.id, format="simple", state="failed").content)
    assert [s["custom_id"] for s in only_failed] == [records[1]["custom_id"], records[3]["custom_id"]]

    # Through the openai SDK, as README shows.
    raw = client.get(
        f"/batches/{done.id}/results", cast_to=httpx.Response, options={"params": {"format": "merged"}}
    )
    assert read_jsonl(raw.text) == merged


def test_simple_embeddings_carry_the_vector_and_bad_formats_are_refused(shared_stack: RunningStack) -> None:
    client = shared_stack.client()
    records = [
        {
            "custom_id": f"emb-{i}",
            "method": "POST",
            "url": "/v1/embeddings",
            "body": {"model": "text-embedding-3-small", "input": f"formats embedding {time.time_ns()} {i}"},
        }
        for i in range(2)
    ]
    batch = client.batches.create(
        input_file_id=upload(client, records).id, endpoint="/v1/embeddings", completion_window="24h"
    )
    done = wait_for_batch(client, batch.id)
    plain = read_jsonl(results(shared_stack, done.id).content)
    simple = read_jsonl(results(shared_stack, done.id, format="simple").content)
    assert [s["content"] for s in simple] == [p["response"]["body"]["data"][0]["embedding"] for p in plain]

    bad = results(shared_stack, done.id, format="csv")
    assert bad.status_code == 400
    assert (bad.json()["error"]["code"], bad.json()["error"]["param"]) == ("invalid_format", "format")
    with_sdk = client.with_options(max_retries=0)
    try:
        with_sdk.get(
            f"/batches/{done.id}/results", cast_to=httpx.Response, options={"params": {"format": "x"}}
        )
    except openai.BadRequestError as exc:
        assert exc.code == "invalid_format"
    else:
        raise AssertionError("format=x was accepted")


def test_cli_results_merged(shared_stack: RunningStack, tmp_path: Any) -> None:
    client = shared_stack.client()
    done, records = mixed_batch(client)
    env = {"BATCHGATE_BASE_URL": shared_stack.base_url, "BATCHGATE_API_KEY": shared_stack.keys["default"]}
    out = tmp_path / "merged.jsonl"
    answer = run_cli("batches", "results", done.id, "--merged", "-o", str(out), env=env)
    assert answer.returncode == 0, answer.stderr
    lines = read_jsonl(out.read_bytes())
    assert [line["custom_id"] for line in lines] == [r["custom_id"] for r in records]
    assert lines[0]["body"] == records[0]["body"]


def secret_records(tool_url: str, callback_url: str) -> list[dict[str, Any]]:
    """A tool record that succeeds, one that fails at its first tool round, a workflow record
    (each with its credential), and a tool record rejected at create."""

    def chat(custom_id: str, extension: dict[str, Any], **body: Any) -> dict[str, Any]:
        request = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": custom_id}], **body}
        return {
            "custom_id": custom_id,
            "method": "POST",
            "url": "/v1/chat/completions",
            "body": {**request, "batchgate": extension},
        }

    tool = {"url": tool_url, "authorization": f"Bearer {TOOL_TOKEN}", "context": {"user": 7}}
    workflow = {"url": callback_url, "authorization": f"Bearer {WORKFLOW_TOKEN}", "context": {"maps": 1}}
    return [
        chat("tool", {"tool_config": tool}, tools=TOOLS, x_sim={"tool_rounds": 1}),
        chat(
            "tool-fails",
            {"tool_config": {**tool, "context": {"mode": "fail_at:1"}}},
            tools=TOOLS,
            x_sim={"tool_rounds": 1},
        ),
        chat("workflow", {"workflow": workflow}),
        chat("tool-rejected", {"tool_config": {**tool, "max_rounds": -1}}, tools=TOOLS),
    ]


def test_results_never_echo_tool_or_workflow_authorization(shared_stack: RunningStack) -> None:
    """README: a tool_config's or workflow's `authorization` is kept only where the record is;
    a key that may read the batch but not its input file must not read it in the merged view."""
    project = f"secrets-{uuid.uuid4().hex[:6]}"
    cli(shared_stack, "projects", "create", project, "--features", "workflows")
    new_key(shared_stack, project)  # every scope: uploads the input, reads the files
    owner = shared_stack.client(project)
    with HttpToolServer() as tools, WorkflowCallbackServer() as callback:
        records = secret_records(tools.url, callback.url)
        input_file = upload(owner, records)
        new_key(shared_stack, project, "--scopes", "batches:read,batches:write")
        reader = shared_stack.client(project)
        created = reader.batches.create(
            input_file_id=input_file.id, endpoint="/v1/chat/completions", completion_window="24h"
        )
        done = wait_for_batch(reader, created.id, timeout_s=180)
        sent = [request.headers["authorization"] for request in tools.requests() + callback.requests()]
    assert (done.request_counts.completed, done.request_counts.failed) == (2, 2)
    assert sorted(set(sent)) == [f"Bearer {TOOL_TOKEN}", f"Bearer {WORKFLOW_TOKEN}"]  # they were used
    with pytest.raises(openai.PermissionDeniedError) as caught:
        reader.files.content(input_file.id)
    assert caught.value.code == "insufficient_scope"

    for result_format in ("merged", "simple", ""):
        answer = results(shared_stack, done.id, project, format=result_format)
        assert answer.status_code == 200, answer.text
        assert TOOL_TOKEN.encode() not in answer.content and WORKFLOW_TOKEN.encode() not in answer.content
    for file_id in (done.output_file_id, done.error_file_id):
        content = owner.files.content(file_id).content
        assert TOOL_TOKEN.encode() not in content and WORKFLOW_TOKEN.encode() not in content

    merged = read_jsonl(results(shared_stack, done.id, project, format="merged").content)
    assert [line["custom_id"] for line in merged] == [r["custom_id"] for r in records]
    for record, line in zip(records[:3], merged, strict=False):
        sent_body, echoed = record["body"], line["body"]
        assert {k: v for k, v in echoed.items() if k != "batchgate"} == {
            k: v for k, v in sent_body.items() if k != "batchgate"
        }
        ((section, sent_config),) = sent_body["batchgate"].items()
        (echoed_section,) = echoed["batchgate"]
        config = echoed["batchgate"][echoed_section]
        assert echoed_section == section and config["authorization"] == "[redacted]"
        assert (config["url"], config["context"]) == (sent_config["url"], sent_config["context"])
    assert merged[3]["body"] is None and merged[3]["error"]["code"] == "invalid_tool_config"
