"""The JSONL line of one item, as OpenAI writes it in output and error files.

- success: `{"id","custom_id","response":{"status_code":200,"request_id","body":{…}},"error":null}`
- upstream HTTP failure: the same shape with the upstream status and its `{"error":{…}}` body
- anything else (rejected at create, cancelled, expired, timeout, connection): `"response":null`
  and `"error":{"code","message"}`

Upstream bodies are stored as compact JSON and spliced in as bytes, not re-parsed.
"""

from __future__ import annotations

from typing import Any

import orjson
from sqlalchemy import Row

from services.common.ids import request_line_id

SUCCEEDED = "succeeded"
FAILED_STATES = ("failed", "cancelled", "expired", "rejected")
FINISHED_STATES = (SUCCEEDED, *FAILED_STATES)


def _compact(body: bytes) -> bytes:
    return orjson.dumps(orjson.loads(body)) if b"\n" in body or b"\r" in body else body


def render(batch_id: str, row: Row[Any]) -> bytes:
    """The line (with its newline) for a finished item row (columns of `LINE_COLUMNS`)."""
    head = (
        b'{"id":"'
        + request_line_id(batch_id, row.idx).encode()
        + b'","custom_id":'
        + orjson.dumps(row.custom_id)
    )
    if row.status_code and row.response is not None:
        return (
            head
            + b',"response":{"status_code":'
            + str(row.status_code).encode()
            + b',"request_id":'
            + orjson.dumps(row.request_id or "")
            + b',"body":'
            + _compact(row.response)
            + b'},"error":null}\n'
        )
    error = {"code": row.error_code or "internal_error", "message": row.error_message or ""}
    return head + b',"response":null,"error":' + orjson.dumps(error) + b"}\n"
