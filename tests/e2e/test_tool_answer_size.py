"""A tool server's answer size, end to end: a batch on the shared stack whose HTTP tool server
(on loopback) answers a megabyte, which reaches the model whole, and 9 MiB, past the 8 MiB
limit, which fails the record saying so."""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from tests.support import RunningStack, read_jsonl, upload, wait_for_batch
from tests.tool_servers import HttpToolServer

MIB = 1024 * 1024
TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]


class SizedToolServer(HttpToolServer):
    """Answers every tool call with `context.size` characters."""

    async def _handle(self, request: web.Request) -> web.Response:
        body = orjson.loads(await request.read())
        text = "t" * int(body["context"]["size"])
        results = [{"tool_call_id": call["id"], "content": text} for call in body["tool_calls"]]
        return web.Response(body=orjson.dumps({"results": results}), content_type="application/json")


def record(custom_id: str, url: str, size: int) -> dict[str, Any]:
    body = {
        "model": "gpt-4o-mini",
        "messages": [{"role": "user", "content": custom_id}],
        "tools": TOOLS,
        "x_sim": {"tool_rounds": 1, "echo": True},
        # max_tokens at its cap: a megabyte read back is ~350,000 tokens by the estimate
        "batchgate": {"tool_config": {"url": url, "max_tokens": 2_000_000, "context": {"size": size}}},
    }
    return {"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions", "body": body}


def test_a_megabyte_tool_answer_reaches_the_model_and_9_mib_fails_the_record(
    shared_stack: RunningStack,
) -> None:
    client = shared_stack.client()
    with SizedToolServer() as tools:
        records = [record("megabyte", tools.url, MIB), record("too-large", tools.url, 9 * MIB)]
        created = client.batches.create(
            input_file_id=upload(client, records).id, endpoint="/v1/chat/completions", completion_window="24h"
        )
        done = wait_for_batch(client, created.id, timeout_s=180)
    assert (done.request_counts.completed, done.request_counts.failed) == (1, 1)
    (line,) = read_jsonl(client.files.content(done.output_file_id).content)
    seen = orjson.loads(line["response"]["body"]["choices"][0]["message"]["content"])
    assert seen["messages"][-1]["content"] == "t" * MIB
    (error,) = read_jsonl(client.files.content(done.error_file_id).content)
    assert error["error"] == {
        "code": "tool_execution_failed",
        "message": f"Tool round 1 failed: the answer of {tools.url} is over 8 MiB.",
    }
