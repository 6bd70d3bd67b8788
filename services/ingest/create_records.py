"""A create's records: the input read once, every record checked and stored as an item
(accepted or rejected), rejections streamed to a blob with the first few kept for the answer."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from batchgate.services.common import errors, telemetry
from batchgate.services.common import proto_values as pv
from batchgate.services.common.access_policy import Policy
from batchgate.services.common.caller import Principal
from batchgate.services.common.db import Database
from batchgate.services.common.db.blobs import BlobWriter, read_lines
from batchgate.services.common.jsonl import dumps_line, one_line
from batchgate.services.ingest.batch_shape import BatchShape, RecordCheck
from batchgate.services.ingest.budget_holds import HoldTally
from batchgate.services.ingest.feature_gate import needs_features
from batchgate.services.ingest.grpc_records import NonJsonRecord
from batchgate.services.ingest.guardrails import Guardrails, guardrails
from batchgate.services.ingest.item_writer import ItemWriter, item_row
from batchgate.services.ingest.simple_form import bare_record, is_bare
from batchgate.services.ingest.tool_url_gate import ToolUrlGate
from batchgate.services.ingest.validation import (
    BODY_DEPTH_RULE,
    MODEL_MISMATCH,
    Accepted,
    Rejected,
    too_deep,
)
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


class RejectionTally:
    """How many records were rejected, with each code, and the first few (the answer's
    preview); what a dry run keeps, so that a bad file of a million lines is not held whole."""

    def __init__(self, preview_max: int) -> None:
        self.count = 0
        self.codes: Counter[str] = Counter()
        self.preview: list[Rejection] = []
        self._preview_max = preview_max

    async def add(self, rejection: Rejection) -> None:
        self.count += 1
        self.codes[rejection.code] += 1
        if len(self.preview) < self._preview_max:
            self.preview.append(rejection)


class Rejections(RejectionTally):
    """Every rejection of a create, streamed to a JSONL blob; the first few kept for the answer."""

    def __init__(self, writer: BlobWriter, preview_max: int) -> None:
        super().__init__(preview_max)
        self.writer = writer

    async def add(self, rejection: Rejection) -> None:
        await super().add(rejection)
        await self.writer.write(dumps_line(rejection.as_json()))


@dataclass(frozen=True)
class Checked:
    total: int
    accepted: int
    model: str | None
    hold_usd: float = 0.0
    """The accepted records' worst-case cost: the batch's budget hold."""
    mixed_models: bool = False
    """Some records named another model than the batch's (`model_mismatch`)."""
    loops: bool = False
    """Some accepted record calls tools or runs a workflow (`RecordScreen.loops`)."""


def inline_line(index: int, request: Any, endpoint: str, model: str = "") -> bytes:
    """One inline request as an input-file line; `{custom_id?, body}` is the short form, and
    with a batch-level `model` a bare request body is one too (`simple_form`)."""
    if model and is_bare(request):
        request = bare_record(index, request, endpoint, model)
    elif isinstance(request, dict) and "body" in request and "url" not in request and "method" not in request:
        body = request["body"]
        if model and isinstance(body, dict):
            body = {"model": model, **body}
        request = {
            "custom_id": request.get("custom_id") or f"row-{index + 1}",
            "method": "POST",
            "url": endpoint,
            "body": body,
        }
    return one_line(dumps_any_depth(request))


def dumps_any_depth(value: Any) -> bytes:
    """`value` (decoded JSON) as JSON, however deep: orjson reads 1024 levels but writes only
    254, and a request too deep to write is stored as sent, for its record to be rejected alone
    (`RecordChecker`) instead of failing the whole create. A `NonJsonRecord` is its line."""
    if isinstance(value, NonJsonRecord):
        return value.line
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError as exc:
        if not too_deep(exc):
            raise
    parts: list[bytes] = []
    pending: list[Any] = [value]  # values still to write, and bytes to write as they are
    while pending:
        item = pending.pop()
        if isinstance(item, bytes):  # decoded JSON holds no bytes: these are our punctuation
            parts.append(item)
        elif isinstance(item, dict):
            entries: list[Any] = [b"{"]
            for n, (key, member) in enumerate(item.items()):
                entries += [b"," if n else b"", orjson.dumps(key) + b":", member]
            pending.extend(reversed([*entries, b"}"]))
        elif isinstance(item, list):
            elements: list[Any] = [b"["]
            for n, member in enumerate(item):
                elements += [b"," if n else b"", member]
            pending.extend(reversed([*elements, b"]"]))
        else:
            parts.append(orjson.dumps(item))
    return b"".join(parts)


def inline_lines(
    shape: BatchShape, requests: list[Any], endpoint: str, model: str = "", max_bytes: int | None = None
) -> Iterator[bytes]:
    """The inline requests as input lines (each as `shape` stores it, or with the batch-level
    `model` as `inline_line` spells the simple form out), 413 past `max_bytes` of JSONL (default:
    the shape's limit): what a create stores and a dry run reads."""
    limit = max_bytes or shape.max_inline_bytes
    size = 0
    for index, value in enumerate(requests):
        try:
            line = (
                inline_line(index, value, endpoint, model)
                if model
                else shape.inline_line(index, value, endpoint)
            )
        except orjson.JSONEncodeError as exc:  # a shape storing requests as sent, too deep
            if not too_deep(exc):
                raise
            line = one_line(dumps_any_depth(value))
        size += len(line) + 1
        if size > limit:
            raise inline_too_large(limit)
        yield line


def inline_too_large(max_bytes: int) -> errors.ApiError:
    """413 for inline requests over `max_bytes` of JSONL."""
    return errors.ApiError(
        413,
        f"Inline requests exceed {max_bytes} bytes, the limit per request; upload them as a file instead.",
        "input_too_large",
        "requests",
    )


async def store_inline(
    db: Database,
    shape: BatchShape,
    owner: str,
    requests: list[Any],
    endpoint: str,
    model: str = "",
    max_bytes: int | None = None,
) -> BlobWriter:
    """The inline requests as an input-file blob (`inline_lines`), stored but not yet published."""
    writer = BlobWriter(db, owner)
    for line in inline_lines(shape, requests, endpoint, model, max_bytes):
        await writer.write(line + b"\n")
    await writer.flush()
    return writer


async def check_records(
    db: Database,
    shape: BatchShape,
    batch: str,
    endpoint: str,
    blob: str,
    rejections: Rejections,
    param: str,
    model: str = "",
    *,
    caller: Principal,
    discount: float,
) -> Checked:
    """Stream the input once: check each record (as `shape` checks its API's records, and
    against the `caller`'s policy), pass it through the project's guardrails, insert its item,
    collect rejections, and sum the accepted records' worst-case cost (after `discount`) as
    the batch's hold; with a batch-level `model`, every record must use it."""
    async with guardrails(caller.project_policy.guardrails, shape.settings) as guard:
        return await _check_each(
            *(db, shape, batch, endpoint, blob, rejections, param, model),
            policy=caller.policy,
            holds=HoldTally(shape.settings, discount),
            guard=guard,
        )


async def _check_each(
    db: Database,
    shape: BatchShape,
    batch: str,
    endpoint: str,
    blob: str,
    rejections: Rejections,
    param: str,
    model: str,
    *,
    policy: Policy,
    holds: HoldTally,
    guard: Guardrails | None,
) -> Checked:
    screen = RecordScreen.start(shape, endpoint, model, policy, guard, param)
    writer = ItemWriter(db)
    operation = telemetry.gen_ai_operation(endpoint)
    index = 0
    accepted = 0
    try:
        async for line_number, outcome in screen.each(read_lines(db, blob)):
            traceparent = None
            if isinstance(outcome, Accepted) and telemetry.sample_new_item("ingest"):
                traceparent = telemetry.start_item_trace(
                    "ingest", item_trace(batch, index, outcome, operation)
                )
            await writer.add(item_row(batch, index, line_number, outcome, traceparent))
            if isinstance(outcome, Accepted):
                accepted += 1
                holds.add(outcome)
            else:
                await rejections.add(Rejection(line_number, outcome.custom_id, outcome.code, outcome.message))
            index += 1
        await writer.close()
    except BaseException:
        await writer.abandon()
        raise
    if index == 0:
        raise errors.invalid("The input has no records.", "empty_file", param)
    return Checked(index, accepted, screen.checker.model, holds.usd, screen.mixed_models, screen.loops)


@dataclass
class RecordScreen:
    """Every check a record gets, the same on a create and a dry run, in order: the shape's
    checker (limits per record, one model, duplicate custom_ids, the caller's allowed models),
    409 `feature_disabled` for a feature the caller's project has off, the tool or workflow
    URL's address policy (`ToolUrlGate`), the project's guardrails; and the record limit."""

    shape: BatchShape
    checker: RecordCheck
    policy: Policy
    guard: Guardrails | None
    param: str
    """The request field the input came in (`input_file_id` or `requests`), for errors."""
    mixed_models: bool = False
    """Some record named another model than the batch's (rejected `model_mismatch`)."""
    loops: bool = False
    """Some accepted record has a tool_config or a workflow: only our executors run it."""
    tool_urls: ToolUrlGate = field(init=False)

    def __post_init__(self) -> None:
        self.tool_urls = ToolUrlGate(self.shape.settings)

    @classmethod
    def start(
        cls,
        shape: BatchShape,
        endpoint: str,
        model: str,
        policy: Policy,
        guard: Guardrails | None,
        param: str,
    ) -> RecordScreen:
        """The screen of one batch's records to `endpoint`; with a batch-level `model`, every
        record must use it."""
        screen = cls(shape, shape.checker(endpoint, policy.allowed_models), policy, guard, param)
        if model:
            screen.checker.model = model
        return screen

    async def each(self, lines: AsyncIterator[bytes]) -> AsyncIterator[tuple[int, Accepted | Rejected]]:
        """(line number, outcome) of every record of `lines`, blank lines skipped; 400
        `input_too_large` past the caller's record limit."""
        limit = min(self.shape.max_records, self.policy.max_records or self.shape.max_records)
        count = 0
        async for line_number, raw in numbered(lines):
            if not raw or raw.isspace():
                continue
            if count >= limit:
                raise too_many_records(limit, self.shape.max_records, self.param)
            count += 1
            yield line_number, await self.check(raw)

    async def check(self, raw: bytes) -> Accepted | Rejected:
        checked = needs_features(self._checked(raw), raw, self.policy)
        outcome = await self.tool_urls.admit(checked)
        if self.guard is not None and isinstance(outcome, Accepted):
            outcome = await self.guard.screen(outcome)
        if isinstance(outcome, Rejected) and outcome.code == MODEL_MISMATCH:
            self.mixed_models = True
        if isinstance(outcome, Accepted) and isinstance(checked, Accepted) and checked.tool_url is not None:
            self.loops = True
        return outcome

    def _checked(self, raw: bytes) -> Accepted | Rejected:
        try:
            return self.checker.check(raw)
        except orjson.JSONEncodeError as exc:  # a checker that stores what it read, too deep
            if not too_deep(exc):
                raise
        record = orjson.loads(raw)  # it was read, so it reads
        custom_id = record.get("custom_id") if isinstance(record, dict) else None
        return Rejected(
            "invalid_params" if self.shape.message_batch else "invalid_record",
            f"The request is nested too deeply. {BODY_DEPTH_RULE}",
            custom_id if isinstance(custom_id, str) else None,
        )


def too_many_records(limit: int, gateway_limit: int, param: str) -> errors.ApiError:
    """400 `input_too_large`: more records than `limit`, the caller's policy's when it is below
    the gateway's."""
    return errors.invalid(
        f"The input has more than {limit} records, the limit per batch"
        + (" for this API key or project." if limit < gateway_limit else "."),
        "input_too_large",
        param,
    )


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


async def numbered(lines: AsyncIterator[bytes]) -> AsyncIterator[tuple[int, bytes]]:
    """(line number from 1, line); a UTF-8 byte order mark opening the input is dropped."""
    number = 0
    async for line in lines:
        number += 1
        if number == 1 and line.startswith(UTF8_BOM):
            line = line[len(UTF8_BOM) :]
        yield number, line
