"""A workflow callback for tests: a real HTTP server on loopback (the tool server's thread and
event loop, `tests.tool_servers.HttpToolServer`) that speaks batchgate's workflow protocol.

How it answers is chosen per record by `context.mode`:
- `map_reduce` (default): step 0's answer is split into `context.maps` (default 3) map
  requests; step 1 reduces their answers in one request whose prompt quotes them; step 2
  completes with `{"summary", "maps"}`. A request's `x_sim` comes from `context.x_sim`.
- `forever`: continues with `context.per_step` (default 1) requests at every step.
- `failed`: answers `{"status": "failed", "error": {"reason": "not today"}}`.
- `status:<code>`, `slow` (sleeps `slow_s`), `not_json`, `malformed` (an unknown status),
  `flaky` (HTTP 500 to the first call of every step, then `map_reduce`).
Every request is kept (`requests()`: headers and body).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

from tests.tool_servers import HttpToolServer, SeenRequest


def _content(result: dict[str, Any]) -> str:
    """A request's answer text, or what went wrong with it."""
    if result.get("status_code") != 200:
        return f"<failed: {result.get('error', {}).get('code') or result.get('status_code')}>"
    return str(result["body"]["choices"][0]["message"]["content"])


def _request(request_id: str, text: str, context: dict[str, Any]) -> dict[str, Any]:
    body: dict[str, Any] = {"messages": [{"role": "user", "content": text}]}
    if context.get("x_sim"):
        body["x_sim"] = context["x_sim"]
    return {"id": request_id, "body": body}


def map_reduce(step: int, results: list[dict[str, Any]], context: dict[str, Any]) -> dict[str, Any]:
    """The three-step map-reduce: split, map, reduce."""
    if step == 0:
        maps = int(context.get("maps", 3))
        first = _content(results[0])
        requests = [_request(f"map-{n}", f"map {n} of: {first[:40]}", context) for n in range(maps)]
        return {"status": "continue", "requests": requests}
    if step == 1:
        quoted = " | ".join(f"{r['id']}={_content(r)[:20]}" for r in results)
        return {"status": "continue", "requests": [_request("reduce", f"reduce: {quoted}", context)]}
    output = {"summary": _content(results[0]), "maps": int(context.get("maps", 3))}
    return {"status": "completed", "output": output}


@dataclass
class WorkflowCallbackServer(HttpToolServer):
    _calls: Counter[tuple[str, int]] = field(default_factory=Counter)

    def _verdict(self, body: dict[str, Any], mode: str, context: dict[str, Any]) -> tuple[int, Any]:
        step = int(body["step"])
        if mode.startswith("status:"):
            return int(mode.split(":", 1)[1]), {"error": "simulated"}
        if mode == "not_json":
            return 200, "this is not JSON"
        if mode == "malformed":
            return 200, {"status": "maybe"}
        if mode == "failed":
            return 200, {"status": "failed", "error": {"reason": "not today"}}
        if mode == "flaky":
            self._calls[(body["custom_id"], step)] += 1
            if self._calls[(body["custom_id"], step)] == 1:
                return 500, {"error": "first try"}
        if mode == "forever":
            per_step = int(context.get("per_step", 1))
            requests = [
                _request(f"s{step + 1}-{n}", f"step {step + 1} #{n}", context) for n in range(per_step)
            ]
            return 200, {"status": "continue", "requests": requests}
        return 200, map_reduce(step, body["results"], context)

    async def _handle(self, request: web.Request) -> web.Response:
        body = orjson.loads(await request.read())
        with self._lock:
            self._requests.append(
                SeenRequest("POST", {k.lower(): v for k, v in request.headers.items()}, body, 0.0)
            )
        context = body.get("context") if isinstance(body.get("context"), dict) else {}
        mode = str(context.get("mode", "map_reduce"))
        if mode == "slow":
            await asyncio.sleep(self.slow_s)
        status, answer = self._verdict(body, mode, context)
        raw = answer.encode() if isinstance(answer, str) else orjson.dumps(answer)
        return web.Response(status=status, body=raw, content_type="application/json")
