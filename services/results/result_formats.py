"""The other shapes of GET /v1/batches/{id}/results: `format=merged` and `format=simple`.

- `merged`: the output/error line of every item (`LineRenderer`), with the request's own
  `body` beside `custom_id`: the join of input and results every user writes by hand. A record
  rejected at create has `"body": null` (it never had a runnable one). The `authorization` of a
  `batchgate.tool_config` or `batchgate.workflow` reads `"[redacted]"` (`redacted_body`).
- `simple`: one `{"custom_id", "content"}` per success (the answer's text: a chat message's
  content, a completion's text, a response's output text, an embedding's vector; the list of
  them in order where the answer holds several) or
  `{"custom_id", "error": {"code", "message"}}` per failure.

Both come in input order; rows are LINE_COLUMNS followed by the request body.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import orjson

from batchgate.services.common.jsonl import dumps_line, one_line
from batchgate.services.common.states import ItemState
from batchgate.services.common.tool_config import CONFIG_KEY, EXTENSION_KEY
from batchgate.services.common.workflow_config import WORKFLOW_KEY
from batchgate.services.results.lines import STATE, LineRenderer

MERGED = "merged"
SIMPLE = "simple"
FORMATS = ("", MERGED, SIMPLE)
LINE_WIDTH = 8  # LINE_COLUMNS; the request body follows
CUSTOM_ID = 1  # positions in LINE_COLUMNS
RESPONSE = 4
AUTHORIZATION = "authorization"  # the secret field of both extension objects below
REDACTED = "[redacted]"
SECRET_HOLDERS = (CONFIG_KEY, WORKFLOW_KEY)
EXTENSION_MARKER = orjson.dumps(EXTENSION_KEY)  # `"batchgate"`, as ingest's orjson writes the key


def redacted_body(body: bytes) -> bytes:
    """The stored request `body` with the `authorization` of its tool_config and workflow
    replaced by REDACTED. README keeps those credentials where the record is: a key that may
    read results need not be one that may read the input file. A marker rather than a missing
    key, so the reader sees the value was withheld, not that it was never sent.

    Bodies are stored as orjson writes them, so one whose bytes lack `"batchgate"` has no
    extension object and is returned as it is: only the few that have one are parsed."""
    if EXTENSION_MARKER not in body:
        return body
    request = orjson.loads(body)
    extension = request.get(EXTENSION_KEY) if isinstance(request, dict) else None
    if not isinstance(extension, dict):
        return body
    holders = [extension[key] for key in SECRET_HOLDERS if isinstance(extension.get(key), dict)]
    holding = [holder for holder in holders if AUTHORIZATION in holder]
    for holder in holding:
        holder[AUTHORIZATION] = REDACTED
    return orjson.dumps(request) if holding else body


def _one_or_all(values: list[Any]) -> Any:
    """An answer's one value, or all of them in order where it holds several (`n` > 1, a list
    of prompts or of inputs to embed): the first alone was kept, with no sign of the rest. None
    for none."""
    return values[0] if len(values) == 1 else values or None


def _in_order(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(entries, key=lambda entry: entry.get("index", 0))


def _chat(body: dict[str, Any]) -> Any:
    return _one_or_all([choice["message"]["content"] for choice in _in_order(body["choices"])])


def _completion(body: dict[str, Any]) -> Any:
    return _one_or_all([choice["text"] for choice in _in_order(body["choices"])])


def _response(body: dict[str, Any]) -> Any:
    return "".join(
        part.get("text", "")
        for output in body.get("output", ())
        if output.get("type") == "message"
        for part in output.get("content", ())
        if part.get("type") == "output_text"
    )


def _embedding(body: dict[str, Any]) -> Any:
    return _one_or_all([entry["embedding"] for entry in _in_order(body["data"])])


CONTENT: dict[str, Callable[[dict[str, Any]], Any]] = {
    "/v1/chat/completions": _chat,
    "/v1/completions": _completion,
    "/v1/responses": _response,
    "/v1/embeddings": _embedding,
}


class MergedRenderer:
    """Each item's output or error line with its request `body` added (its credentials
    redacted)."""

    def __init__(self, batch_id: str) -> None:
        self._lines = LineRenderer(batch_id)

    def lines(self, rows: Sequence[Sequence[Any]]) -> bytes:
        out = []
        for row in rows:
            line = self._lines.line(row[:LINE_WIDTH])  # ends with `}\n`
            body = one_line(redacted_body(row[LINE_WIDTH])) if row[LINE_WIDTH] is not None else b"null"
            out.append(b"".join((line[:-2], b',"body":', body, b"}\n")))
        return b"".join(out)


class SimpleRenderer:
    """`{"custom_id", "content"}` or `{"custom_id", "error"}` per item."""

    def __init__(self, endpoint: str) -> None:
        self._content = CONTENT.get(endpoint)

    def content(self, response: bytes | None) -> Any:
        """The answer's text (or vector); null when the endpoint's shape is not recognised."""
        if self._content is None or response is None:
            return None
        try:
            return self._content(orjson.loads(response))
        except (KeyError, IndexError, TypeError, AttributeError):
            return None

    @staticmethod
    def error(row: Sequence[Any]) -> dict[str, Any]:
        _index, _custom_id, _state, status_code, response, _request_id, code, message = row[:LINE_WIDTH]
        if status_code and response is not None:  # an upstream HTTP failure: its own error object
            upstream = orjson.loads(response)
            found = upstream.get("error") if isinstance(upstream, dict) else None
            found = found if isinstance(found, dict) else {}
            return {"code": found.get("code") or f"http_{status_code}", "message": found.get("message") or ""}
        return {"code": code or "internal_error", "message": message or ""}

    def lines(self, rows: Sequence[Sequence[Any]]) -> bytes:
        out = []
        for row in rows:
            if row[STATE] == ItemState.SUCCEEDED:
                out.append(dumps_line({"custom_id": row[CUSTOM_ID], "content": self.content(row[RESPONSE])}))
            else:
                out.append(dumps_line({"custom_id": row[CUSTOM_ID], "error": self.error(row)}))
        return b"".join(out)
