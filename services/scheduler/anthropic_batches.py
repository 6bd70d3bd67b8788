"""Anthropic's Message Batches API behind the follower's `BatchAPI`: OpenAI batch lines go in
translated to Messages requests (`translate.chat_to_anthropic`), results come back as OpenAI
batch lines (`translate.responses`), and `processing_status` becomes OpenAI's status names.

Anthropic has no input files (the requests ride in the create body: `upload` stores nothing)
and no metadata to tag a batch with, so a create that may have reached Anthropic before the
scheduler died is found again by what it was: the batch of the same number of requests created
at or after the part was planned (one batchgate per key makes that unambiguous).
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

import aiohttp
import orjson

from batchgate.services.common.catalogue import ProviderConfig
from batchgate.services.common.states import BatchStatus, ItemErrorCode
from batchgate.services.common.translate.chat_to_anthropic import to_anthropic_request
from batchgate.services.common.translate.responses import to_chat_completion
from batchgate.services.common.translate.shared import Untranslatable
from batchgate.services.scheduler.provider_batches import (
    BatchAPI,
    OpenAIBatches,
    ProviderBatch,
    ProviderError,
)

NO_FILE = "-"  # `provider_file_id` of a part whose requests go in the create body
CLOCK_SKEW_S = 300.0  # how much earlier than our plan a found batch may say it was created
RESULT_ERRORS = {"canceled": ItemErrorCode.BATCH_CANCELLED, "expired": ItemErrorCode.BATCH_EXPIRED}


def _seconds(stamp: Any) -> float:
    try:
        return datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def _batch(body: dict[str, Any]) -> ProviderBatch:
    counts = body.get("request_counts") or {}
    status = {"in_progress": BatchStatus.IN_PROGRESS, "canceling": BatchStatus.CANCELLING}.get(
        str(body.get("processing_status")),
        BatchStatus.CANCELLED if body.get("cancel_initiated_at") else BatchStatus.COMPLETED,
    )
    return ProviderBatch(
        id=str(body["id"]),
        status=status,
        completed=int(counts.get("succeeded") or 0),
        failed=int(counts.get("errored") or 0),
        output_file_id=body.get("results_url") or None,
        error_file_id=None,
        errors=[],
    )


def _request(line: bytes, default_max_tokens: int) -> dict[str, Any]:
    record = orjson.loads(line)
    body = record["body"]
    try:
        params = to_anthropic_request(body, model=body["model"], default_max_tokens=default_max_tokens)
    except Untranslatable as exc:  # ingest checked these records: a changed catalogue
        raise ProviderError(f"record {record['custom_id']}: {exc}", retryable=False) from exc
    return {"custom_id": record["custom_id"], "params": params}


def _line(result: dict[str, Any]) -> bytes:
    """One Anthropic result as an OpenAI batch output or error line."""
    outcome = result.get("result") or {}
    kind = outcome.get("type")
    custom_id = result.get("custom_id")
    if kind == "succeeded":
        body = to_chat_completion(outcome.get("message") or {}, created=int(time.time()))
        return orjson.dumps({"custom_id": custom_id, "response": {"status_code": 200, "body": body}})
    error = outcome.get("error") or {}
    error = error.get("error", error) if isinstance(error, dict) else {}
    code = RESULT_ERRORS.get(str(kind)) or str(error.get("type") or "provider_error")
    message = str(error.get("message") or kind)
    return orjson.dumps(
        {"custom_id": custom_id, "response": None, "error": {"code": code, "message": message}}
    )


class AnthropicBatches(BatchAPI):
    def __init__(self, provider: ProviderConfig, session: aiohttp.ClientSession, timeout_s: float) -> None:
        self._http = OpenAIBatches(provider, session, timeout_s)  # its error handling and JSON
        key = provider.api_keys[0] if provider.api_keys else ""
        self._http.headers = {"x-api-key": key, "anthropic-version": provider.anthropic_version}
        self._max_tokens = provider.default_max_tokens

    async def find(self, token: str, *, since: float, count: int) -> ProviderBatch | None:
        page = await self._http.json("GET", "/messages/batches", params={"limit": "100"})
        for body in page.get("data") or ():
            counts = body.get("request_counts") or {}
            if sum(int(v or 0) for v in counts.values()) == count and (
                _seconds(body.get("created_at")) >= since - CLOCK_SKEW_S
            ):
                return _batch(body)
        return None

    async def upload(self, jsonl: bytes, filename: str) -> str:
        return NO_FILE

    async def create(self, *, file_id: str, jsonl: bytes, endpoint: str, token: str) -> ProviderBatch:
        requests = [_request(line, self._max_tokens) for line in jsonl.splitlines() if line.strip()]
        return _batch(await self._http.json("POST", "/messages/batches", json={"requests": requests}))

    async def get(self, batch_id: str) -> ProviderBatch:
        return _batch(await self._http.json("GET", f"/messages/batches/{batch_id}"))

    async def cancel(self, batch_id: str) -> None:
        await self._http.json("POST", f"/messages/batches/{batch_id}/cancel")

    async def result_lines(self, batch: ProviderBatch) -> list[bytes]:
        if not batch.output_file_id:
            return []
        raw = await self._http.call("GET", "", url=batch.output_file_id)
        return [_line(orjson.loads(line)) for line in raw.splitlines() if line.strip()]
