"""Inline records sent over native gRPC, as the create pipeline takes them.

A REST body is JSON, so its records hold only JSON values. A native gRPC `CreateBatch` or
`CreateMessageBatch` sends each record as a `google.protobuf.Value`, whose numbers are doubles
and may be NaN or ±Infinity, which JSON has no spelling for (orjson would write them as
`null`, changing the request). Such a record is kept as `NonJsonRecord`: its line is stored
in Python's spelling (`NaN`, `Infinity`, `-Infinity`), as a file line with them would be
uploaded, and the record checkers reject it alone (`non_json_number`), as they reject that
file line, instead of sending `null` upstream.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from google.protobuf import struct_pb2

from batchgate.services.common import proto_values as pv


@dataclass(frozen=True)
class NonJsonRecord:
    """A record holding a number JSON cannot represent; `line` is how it is stored."""

    line: bytes


def _finite(record: Any) -> bool:
    """No number in `record` (decoded from a Value, NaN and ±Infinity kept as floats) is NaN
    or ±Infinity. Walking the decoded record costs a tenth of walking the Value again."""
    pending = [record]
    while pending:
        item = pending.pop()
        kind = type(item)
        if kind is dict:
            pending.extend(item.values())
        elif kind is list:
            pending.extend(item)
        elif kind is float and not math.isfinite(item):
            return False
    return True


def json_default(value: Any) -> Any:
    """orjson's `default` for values holding `NonJsonRecord`s (an Idempotency-Key's digest)."""
    if isinstance(value, NonJsonRecord):
        return {"non_json_line": value.line.decode()}
    raise TypeError(f"{type(value).__name__} is not JSON")


def grpc_records(values: Iterable[struct_pb2.Value]) -> list[Any]:
    """The records of a native gRPC create as decoded JSON, or `NonJsonRecord` for one that
    JSON cannot represent."""
    records: list[Any] = []
    for value in values:
        record = pv.to_python(value)
        if not _finite(record):
            record = NonJsonRecord(json.dumps(record, ensure_ascii=False).encode())
        records.append(record)
    return records


@dataclass(frozen=True)
class NonJsonNumber:
    """Where a line that is JSON but for NaN or ±Infinity holds the first of them."""

    value: Any
    """What the line stands for (Python's reading of it)."""
    path: str
    """Where the number is, e.g. `body.temperature`."""
    spelling: str
    """`NaN`, `Infinity` or `-Infinity`."""

    def message(self, what: str = "line") -> str:
        """Why `what` (a line, a request) is refused."""
        where = f"'{self.path}'" if self.path else "it"
        return f"The {what} is not valid JSON: {where} is {self.spelling}, which JSON cannot represent."


def non_json_number(raw: bytes) -> NonJsonNumber | None:
    """For a line that is not JSON only because it holds NaN or ±Infinity, where the first one
    is; None for any other line."""
    if b"NaN" not in raw and b"Infinity" not in raw:
        return None
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    pending: list[tuple[str, Any]] = [("", value)]
    while pending:
        path, item = pending.pop()
        if isinstance(item, float) and not math.isfinite(item):
            spelling = "NaN" if math.isnan(item) else "Infinity" if item > 0 else "-Infinity"
            return NonJsonNumber(value, path, spelling)
        if isinstance(item, dict):
            members = [(f"{path}.{key}" if path else str(key), member) for key, member in item.items()]
            pending.extend(reversed(members))
        elif isinstance(item, list):
            pending.extend(reversed([(f"{path}[{index}]", member) for index, member in enumerate(item)]))
    return None
