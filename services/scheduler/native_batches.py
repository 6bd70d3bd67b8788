"""Natively run batches: passed through to the provider's own batch API instead of being
leased to executors. The maintenance leader runs `NativeBatches.tick` on every round.

Provider batches go through OpenAI's batch statuses, which are ours (`BatchStatus`); an
Anthropic batch's are mapped onto them.

1. Plan: a running native batch's items are leased to `NATIVE_HOLDER` and split into provider
   batches of at most the provider's `batch_limit` items, each a `native_batches` row with
   its own token, in one transaction, before any provider call.
2. Submit: look the token up among the provider's batches first (a scheduler that died after
   the provider accepted a batch, before storing its id, finds it there and never creates a
   second one); else upload the part's records as one JSONL (custom_id = our item index),
   store the file id, create the batch tagged with the token and store its id.
3. Follow: poll each provider batch no more often than its interval (first
   `native_poll_interval_s`, doubling while nothing changes, up to the maximum); forward a
   cancel once. Provider errors back off the same way and are retried.
4. Import: once a provider batch ends, its output and error lines are recorded through results'
   RecordResults like an executor's outcomes (fencing tokens, usage and cost at the batch's
   discount, webhooks and files unchanged); items it reported `batch_expired` or
   `batch_cancelled`, or never reported, are closed once every part is imported: cancelled if
   the batch was cancelled, failed with the provider's error if a provider batch failed
   outright, else expired. Then results finalizes the batch (output files in input order).
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import aiohttp
import orjson

from batchgate.internal.v1 import items_pb2, recorder_pb2
from batchgate.services.common.batch_modes import batch_provider
from batchgate.services.common.config import Settings
from batchgate.services.common.db import AnyRow, Database, native_batches, queue
from batchgate.services.common.faults import crash_point
from batchgate.services.common.states import BATCH_TERMINAL, BatchStatus, ItemErrorCode
from batchgate.services.common.token_usage import usage_of
from batchgate.services.scheduler.anthropic_batches import AnthropicBatches
from batchgate.services.scheduler.provider_batches import (
    BatchAPI,
    OpenAIBatches,
    ProviderBatch,
    ProviderError,
)
from batchgate.services.scheduler.queue import CLOSE_CODES

log = logging.getLogger(__name__)

RECORD_GROUP = 500  # outcomes per RecordResults call
PROVIDER_TIMEOUT_S = 300.0
FAILED_CODE = "provider_batch_failed"
LEFT_OPEN = frozenset({ItemErrorCode.BATCH_EXPIRED, ItemErrorCode.BATCH_CANCELLED})

Record = Callable[[Sequence[recorder_pb2.Outcome]], Awaitable[None]]


def _token() -> str:
    return f"nb_{secrets.token_hex(12)}"


def _jsonl(rows: Sequence[AnyRow], endpoint: str, upstream_model: str) -> bytes:
    """The part's records as the provider's input file: custom_id is our item index."""
    lines = []
    for row in rows:
        body = orjson.loads(row.body)
        if upstream_model:
            body["model"] = upstream_model
        lines.append(
            orjson.dumps({"custom_id": str(row.idx), "method": "POST", "url": endpoint, "body": body})
        )
    return b"\n".join(lines) + b"\n"


def outcome_of(
    line: Any, *, ref: items_pb2.ItemRef, model: str, provider: str
) -> recorder_pb2.Outcome | None:
    """One provider output/error line as our outcome; None for an item the provider expired or
    cancelled (closed with the batch's end instead)."""
    response = line.get("response") if isinstance(line, dict) else None
    error = (line.get("error") if isinstance(line, dict) else None) or {}
    if isinstance(response, dict) and response.get("status_code"):
        status = int(response["status_code"])
        body = response.get("body")
        return recorder_pb2.Outcome(
            ref=ref,
            state=recorder_pb2.OUTCOME_STATE_SUCCEEDED
            if 200 <= status < 300
            else recorder_pb2.OUTCOME_STATE_FAILED,
            status_code=status,
            response_body=orjson.dumps(body),
            request_id=str(response.get("request_id") or ""),
            model=model,
            provider=provider,
            usage=usage_of(body),
            attempts=1,
        )
    code = str(error.get("code") or "provider_error") if isinstance(error, dict) else "provider_error"
    if code in LEFT_OPEN:
        return None
    return recorder_pb2.Outcome(
        ref=ref,
        state=recorder_pb2.OUTCOME_STATE_FAILED,
        error_code=code,
        error_message=str(error.get("message") or "") if isinstance(error, dict) else "",
        model=model,
        provider=provider,
        attempts=1,
    )


def _outcomes(lines: Sequence[bytes], leased: dict[int, int], part: AnyRow) -> list[recorder_pb2.Outcome]:
    """The part's result lines as outcomes of the items still leased to it, in input order
    (custom_id is our item index; lines of items already recorded are skipped)."""
    outcomes = []
    for raw in lines:
        line = orjson.loads(raw) if raw.strip() else {}
        custom_id = str(line.get("custom_id", ""))
        index = int(custom_id) if custom_id.isdigit() else -1
        if index not in leased:
            continue
        ref = items_pb2.ItemRef(batch_id=part.batch_id, index=index, attempt=leased[index])
        outcome = outcome_of(line, ref=ref, model=part.model or "", provider=part.provider)
        if outcome is not None:
            outcomes.append(outcome)
    return sorted(outcomes, key=lambda o: o.ref.index)


def _end_of(status: str, errors: Sequence[str]) -> tuple[BatchStatus, str, str]:
    """How the items no provider line settled end (and so the batch): cancelled when the batch
    was cancelled, failed when a provider batch failed outright, else expired (the provider's
    window passed before it ran them)."""
    if status == BatchStatus.CANCELLING:
        code, message = CLOSE_CODES[BatchStatus.CANCELLED]
        return BatchStatus.CANCELLED, code, message
    if errors:
        return BatchStatus.FAILED, FAILED_CODE, f"The provider's batch failed: {errors[0]}"
    code, message = CLOSE_CODES[BatchStatus.EXPIRED]
    return BatchStatus.EXPIRED, code, message


class NativeBatches:
    def __init__(
        self, settings: Settings, db: Database, record: Record, finalize: Callable[[str], Awaitable[None]]
    ) -> None:
        self._settings = settings
        self._db = db
        self._record = record
        self._finalize = finalize
        self._session: aiohttp.ClientSession | None = None

    def _api(self, provider: str) -> BatchAPI:
        config = self._settings.provider(provider)
        if config is None:
            raise ProviderError(f"provider {provider!r} is no longer configured", retryable=True)
        if self._session is None:
            self._session = aiohttp.ClientSession()
        kind = AnthropicBatches if config.kind == "anthropic" else OpenAIBatches
        return kind(config, self._session, PROVIDER_TIMEOUT_S)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def tick(self) -> None:
        await self._plan()
        async with self._db.read() as conn:
            due = await native_batches.due(conn, time.time())
        for part in due:
            try:
                await self._step(part)
            except ProviderError as exc:
                log.warning("provider batch %s of %s: %s", part.token, part.batch_id, exc)
                if exc.retryable or part.provider_batch_id is not None:
                    await self._back_off(part)
                else:  # the provider refused the batch itself: it fails, with the provider's error
                    await self._update(part.token, imported=True, error=str(exc))
                    await self._settle(part.batch_id)
            except Exception:  # one bad part must not hold up the others: it waits its turn again
                log.exception("provider batch %s of %s failed; retrying later", part.token, part.batch_id)
                await self._back_off(part)

    async def _plan(self) -> None:
        async with self._db.read() as conn:
            batches = await native_batches.unplanned(conn)
        for batch in batches:
            provider = batch_provider(self._settings, batch.model)
            if provider is None:
                log.error("batch %s: model %r has no batch API configured any more", batch.id, batch.model)
                continue
            async with self._db.write() as conn:
                parts = await native_batches.plan(
                    self._db,
                    conn,
                    batch_id=batch.id,
                    provider=provider.name,
                    limit=provider.batch_limit,
                    new_token=_token,
                    poll_interval_s=self._settings.native_poll_interval_s,
                    now=time.time(),
                )
            log.info("batch %s: %d provider batches on %s", batch.id, len(parts), provider.name)

    async def _update(self, token: str, **values: Any) -> None:
        async with self._db.write() as conn:
            await native_batches.update_part(conn, token, **values)

    async def _back_off(self, part: AnyRow) -> None:
        interval = min(part.poll_interval_s * 2, self._settings.native_poll_max_interval_s)
        await self._update(part.token, poll_interval_s=interval, next_poll_at=time.time() + interval)

    async def _step(self, part: AnyRow) -> None:
        if part.provider_batch_id is None:
            await self._submit(part)
        elif part.status == BatchStatus.CANCELLING and not part.cancel_sent:
            await self._forward_cancel(part)
        else:
            await self._poll(part)

    async def _forward_cancel(self, part: AnyRow) -> None:
        """Once; a provider that refuses it (its batch already ended) is polled as usual."""
        try:
            await self._api(part.provider).cancel(part.provider_batch_id)
            log.info("batch %s: cancel forwarded to provider batch %s", part.batch_id, part.provider_batch_id)
        except ProviderError as exc:
            if exc.retryable:
                raise
            log.info("batch %s: provider batch %s refused the cancel: %s", part.batch_id, part.token, exc)
        await self._update(part.token, cancel_sent=True, next_poll_at=time.time())

    async def _submit(self, part: AnyRow) -> None:
        api = self._api(part.provider)
        async with self._db.read() as conn:
            rows = await native_batches.records(conn, part.batch_id, part.first_idx, part.end_idx)
        found = None
        if part.provider_file_id is not None:  # a create may have reached the provider
            found = await api.find(part.token, since=part.created_at, count=len(rows))
            async with self._db.read() as conn:
                if found is not None and await native_batches.is_known(conn, part.provider, found.id):
                    found = None  # another part's
        if found is None and part.status == BatchStatus.CANCELLING:  # cancelled before it was sent
            await self._update(part.token, imported=True, provider_status=BatchStatus.CANCELLED)
            await self._settle(part.batch_id)
            return
        if found is None:
            model = self._settings.model(part.model)
            data = _jsonl(rows, part.endpoint, model.upstream_model if model else "")
            file_id = part.provider_file_id
            if file_id is None:
                file_id = await api.upload(data, f"{part.batch_id}-{part.part}.jsonl")
                await self._update(part.token, provider_file_id=file_id)
            found = await api.create(file_id=file_id, jsonl=data, endpoint=part.endpoint, token=part.token)
            crash_point("scheduler.native.after_create")
        await self._update(
            part.token,
            provider_batch_id=found.id,
            provider_status=found.status,
            next_poll_at=time.time() + part.poll_interval_s,
        )
        log.info("batch %s: part %d is provider batch %s", part.batch_id, part.part, found.id)

    async def _poll(self, part: AnyRow) -> None:
        found = await self._api(part.provider).get(part.provider_batch_id)
        if found.status in BATCH_TERMINAL:
            await self._import(part, found)
            return
        moved = (found.status, found.completed, found.failed) != (
            part.provider_status,
            part.completed,
            part.failed,
        )
        interval = (
            self._settings.native_poll_interval_s
            if moved
            else min(part.poll_interval_s * 2, self._settings.native_poll_max_interval_s)
        )
        await self._update(
            part.token,
            provider_status=found.status,
            completed=found.completed,
            failed=found.failed,
            poll_interval_s=interval,
            next_poll_at=time.time() + interval,
        )

    async def _import(self, part: AnyRow, found: ProviderBatch) -> None:
        """Record the ended provider batch's lines (again, after a crash: RecordResults keeps
        each outcome once), then mark it imported."""
        api = self._api(part.provider)
        async with self._db.read() as conn:
            leased = {
                r.idx: r.attempt
                for r in await native_batches.records(conn, part.batch_id, part.first_idx, part.end_idx)
            }
        outcomes = _outcomes(await api.result_lines(found), leased, part)
        for start in range(0, len(outcomes), RECORD_GROUP):
            await self._record(outcomes[start : start + RECORD_GROUP])
        error = None
        if found.status == BatchStatus.FAILED:
            error = "; ".join(str(e.get("message") or e.get("code") or e) for e in found.errors) or "failed"
        await self._update(
            part.token,
            imported=True,
            provider_status=found.status,
            completed=found.completed,
            failed=found.failed,
            error=error,
        )
        log.info(
            "batch %s: provider batch %s %s, %d outcomes",
            part.batch_id,
            found.id,
            found.status,
            len(outcomes),
        )
        await self._settle(part.batch_id)

    async def _settle(self, batch_id: str) -> None:
        """Once every part is imported: close what no provider line settled, then finalize."""
        async with self._db.write() as conn:
            if await native_batches.parts_left(conn, batch_id):
                return
            status = (await queue.statuses(conn, [batch_id]))[batch_id].status
            errors = await native_batches.errors_of(conn, batch_id)
            end, code, message = _end_of(status, errors)
            if errors:
                listed = [{"code": FAILED_CODE, "message": e, "param": None, "line": None} for e in errors]
                await native_batches.set_batch_errors(conn, batch_id, orjson.dumps(listed).decode())
            await queue.close_open(
                self._db,
                conn,
                batch_id=batch_id,
                end=end,
                error_code=code,
                error_message=message,
                hard=True,
                now=time.time(),
            )
        await self._finalize(batch_id)
