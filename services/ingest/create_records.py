"""A create's records: the input read once, every record checked and stored as an item
(accepted or rejected), rejections streamed to a blob with the first few kept for the answer."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import orjson

from batchgate.services.common import errors, telemetry
from batchgate.services.common import proto_values as pv
from batchgate.services.common.access_policy import Policy
from batchgate.services.common.config import Settings
from batchgate.services.common.db import Database
from batchgate.services.common.db.blobs import BlobWriter, read_lines
from batchgate.services.common.jsonl import dumps_line, one_line
from batchgate.services.ingest.budget_holds import HoldTally
from batchgate.services.ingest.feature_gate import needs_features
from batchgate.services.ingest.guardrails import Guardrails
from batchgate.services.ingest.item_writer import ItemWriter, item_row
from batchgate.services.ingest.tool_url_gate import ToolUrlGate
from batchgate.services.ingest.validation import Accepted, RecordChecker
from batchgate.v1 import batches_pb2

ERROR_PREVIEW_BYTES = 5000
UTF8_BOM = b"\xef\xbb\xbf"


@dataclass
class Rejection:
    line: int
    custom_id: str | None
    code: str
    message: str

    def as_json(self) -> dict[str, Any]:
        return {"line": self.line, "custom_id": self.custom_id, "code": self.code, "message": self.message}

    def message_proto(self) -> batches_pb2.RejectedRecord:
        return batches_pb2.RejectedRecord(
            line=self.line, custom_id=pv.string_or_null(self.custom_id), code=self.code, message=self.message
        )


class Rejections:
    """Every rejection of a create, streamed to a JSONL blob; the first few kept for the answer."""

    def __init__(self, writer: BlobWriter, preview_max: int) -> None:
        self.writer = writer
        self.count = 0
        self.codes: Counter[str] = Counter()
        self.preview: list[Rejection] = []
        self._preview_max = preview_max

    async def add(self, rejection: Rejection) -> None:
        self.count += 1
        self.codes[rejection.code] += 1
        if len(self.preview) < self._preview_max:
            self.preview.append(rejection)
        await self.writer.write(dumps_line(rejection.as_json()))


@dataclass(frozen=True)
class Checked:
    total: int
    accepted: int
    model: str | None


def inline_line(index: int, request: Any, endpoint: str) -> bytes:
    """One inline request as an input-file line; `{custom_id?, body}` is the short form."""
    if isinstance(request, dict) and "body" in request and "url" not in request and "method" not in request:
        request = {
            "custom_id": request.get("custom_id") or f"row-{index + 1}",
            "method": "POST",
            "url": endpoint,
            "body": request["body"],
        }
    return one_line(orjson.dumps(request))


async def store_inline(
    db: Database, settings: Settings, owner: str, requests: list[Any], endpoint: str
) -> BlobWriter:
    """The inline requests as an input-file blob, stored but not yet published."""
    writer = BlobWriter(db, owner)
    for index, value in enumerate(requests):
        await writer.write(inline_line(index, value, endpoint) + b"\n")
        if writer.size > settings.max_inline_bytes:
            raise errors.ApiError(
                413,
                f"Inline requests exceed {settings.max_inline_bytes} bytes, the limit per "
                "request; upload them as a file instead.",
                "input_too_large",
                "requests",
            )
    await writer.flush()
    return writer


async def check_records(
    db: Database,
    settings: Settings,
    batch: str,
    endpoint: str,
    blob: str,
    rejections: Rejections,
    param: str,
    *,
    policy: Policy | None = None,
    holds: HoldTally | None = None,
    guard: Guardrails | None = None,
) -> Checked:
    """Stream the input once: check each record (against the caller's `policy` too), insert
    its item, collect rejections, add each accepted record's worst-case cost to `holds`.
    `guard`'s filters run on each record that passed the checks: what they leave is stored."""
    policy = policy or Policy()
    checker = RecordChecker(settings, endpoint, allowed_models=policy.allowed_models)
    max_records = min(settings.max_batch_records, policy.max_records or settings.max_batch_records)
    tool_urls = ToolUrlGate(settings)
    writer = ItemWriter(db)
    operation = telemetry.gen_ai_operation(endpoint)
    index = 0
    accepted = 0
    try:
        async for line_number, raw in _numbered(read_lines(db, blob)):
            if not raw or raw.isspace():
                continue
            if index >= max_records:
                raise errors.invalid(
                    f"The input has more than {max_records} records, the limit per batch"
                    + (" for this API key or project." if max_records < settings.max_batch_records else "."),
                    "input_too_large",
                    param,
                )
            outcome = await tool_urls.admit(needs_features(checker.check(raw), policy))
            if guard is not None and isinstance(outcome, Accepted):
                outcome = await guard.screen(outcome)
            traceparent = None
            if isinstance(outcome, Accepted) and telemetry.sample_new_item("ingest"):
                traceparent = telemetry.start_item_trace(
                    "ingest", item_trace(batch, index, outcome, operation)
                )
            await writer.add(item_row(batch, index, line_number, outcome, traceparent))
            if isinstance(outcome, Accepted):
                accepted += 1
                if holds is not None:
                    holds.add(outcome.body, outcome.model)
            else:
                await rejections.add(Rejection(line_number, outcome.custom_id, outcome.code, outcome.message))
            index += 1
        await writer.close()
    except BaseException:
        await writer.abandon()
        raise
    if index == 0:
        raise errors.invalid("The input has no records.", "empty_file", param)
    return Checked(index, accepted, checker.model)


def item_trace(batch: str, index: int, accepted: Accepted, operation: str) -> dict[str, Any]:
    """The attributes of an item's first span (its acceptance)."""
    return {
        **telemetry.item_attributes(batch, index, accepted.custom_id),
        "gen_ai.operation.name": operation,
        "gen_ai.request.model": accepted.model,
    }


def error_preview(rejections: list[Rejection]) -> list[dict[str, Any]]:
    """Rejections that fit in an error answer: it travels as gRPC trailing metadata, which
    clients cap at 8 KiB by default. The rejections file always has all of them."""
    preview: list[dict[str, Any]] = []
    size = 0
    for rejection in rejections:
        entry = rejection.as_json()
        size += len(orjson.dumps(entry)) + 1
        if size > ERROR_PREVIEW_BYTES:
            break
        preview.append(entry)
    return preview


async def _numbered(lines: AsyncIterator[bytes]) -> AsyncIterator[tuple[int, bytes]]:
    """(line number from 1, line); a UTF-8 byte order mark opening the input is dropped."""
    number = 0
    async for line in lines:
        number += 1
        if number == 1 and line.startswith(UTF8_BOM):
            line = line[len(UTF8_BOM) :]
        yield number, line
