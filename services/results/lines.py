"""The JSONL line of one item, as OpenAI writes it in output and error files.

- success: `{"id","custom_id","response":{"status_code":200,"request_id","body":{…}},"error":null}`
- upstream HTTP failure: the same shape with the upstream status and its `{"error":{…}}` body
  (and `"error":null`: the failure is under `response.body.error`, as OpenAI writes it)
- anything else (rejected at create, cancelled, expired, timeout, connection): `"response":null`
  and `"error":{"code","message"}`

Upstream bodies are stored as compact JSON and spliced in as bytes, not re-parsed; characters
that some readers take for line breaks are escaped (`batchgate.services.common.jsonl`). Finalizing
renders every line of a batch, so `LineRenderer` builds each line with one join and derives
the line ids from a hash state prepared once per batch.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import orjson

from batchgate.services.common.jsonl import one_line
from batchgate.services.common.states import ItemState

STATE = 2  # position of `state` in LINE_COLUMNS


def _compact(body: bytes) -> bytes:
    return orjson.dumps(orjson.loads(body)) if b"\n" in body or b"\r" in body else body


class LineRenderer:
    """Renders the lines of one batch's finished item rows (LINE_COLUMNS, unpacked by position:
    a row's attribute access costs more than the rest of the line).

    Line ids are `batchgate.services.common.ids.request_line_id(batch, index)`: the blake2b state of
    `"<batch>:"` is hashed once and copied per line.
    """

    def __init__(self, batch_id: str) -> None:
        self._id_hash = hashlib.blake2b(f"{batch_id}:".encode(), digest_size=16)

    def line(self, row: Sequence[Any]) -> bytes:
        """The line, with its newline."""
        index, custom_id, _state, status_code, response, request_id, error_code, error_message = row
        line_id = self._id_hash.copy()
        line_id.update(b"%d" % index)
        head = (
            b'{"id":"batch_req_',
            line_id.hexdigest().encode(),
            b'","custom_id":',
            orjson.dumps(custom_id),
        )
        if status_code and response is not None:
            line = b"".join(
                (
                    *head,
                    b',"response":{"status_code":',
                    b"%d" % status_code,
                    b',"request_id":',
                    orjson.dumps(request_id or ""),
                    b',"body":',
                    _compact(response),
                    b'},"error":null}\n',
                )
            )
        else:
            error = {"code": error_code or "internal_error", "message": error_message or ""}
            line = b"".join((*head, b',"response":null,"error":', orjson.dumps(error), b"}\n"))
        return one_line(line)

    def lines(self, rows: Sequence[Sequence[Any]]) -> bytes:
        """Every row's line, in order."""
        return b"".join([self.line(row) for row in rows])

    def split(self, rows: Sequence[Sequence[Any]]) -> tuple[list[bytes], list[bytes]]:
        """(output lines, error lines) of the rows: successes apart from every failure."""
        good: list[bytes] = []
        bad: list[bytes] = []
        for row in rows:
            (good if row[STATE] == ItemState.SUCCEEDED else bad).append(self.line(row))
        return good, bad
