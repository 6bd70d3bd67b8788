"""The OpenAI Batch API as batchgate calls it on the operator's key: upload a JSONL, create a
batch tagged with our idempotency token, find it again by that token, poll it, cancel it and
download its output and error files.

Any OpenAI-compatible server that implements `/v1/files` and `/v1/batches` will do (OpenAI
itself, or another batchgate). Every failure is a `ProviderError`; `retryable` says whether
trying again later may help (connection errors, timeouts, 408, 409, 429 and 5xx).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import aiohttp
import orjson

from batchgate.services.common.catalogue import ProviderConfig

TOKEN_KEY = "batchgate_token"  # the provider batch's metadata key holding our token
RETRYABLE_STATUS = frozenset({408, 409, 429})
LIST_PAGE = 100
LIST_PAGES_MAX = 20  # how far back a reconcile looks for a token (newest first)


class ProviderError(Exception):
    def __init__(self, message: str, *, retryable: bool) -> None:
        super().__init__(message)
        self.retryable = retryable


@dataclass(frozen=True, kw_only=True)
class ProviderBatch:
    """What batchgate reads of a provider batch."""

    id: str
    status: str
    completed: int
    failed: int
    output_file_id: str | None
    error_file_id: str | None
    errors: list[Mapping[str, Any]]


class BatchAPI(Protocol):
    """A provider's batch API as the follower (`native_batches`) uses it; lines in and out are
    OpenAI's batch file lines whatever the provider speaks."""

    async def find(self, token: str, *, since: float, count: int) -> ProviderBatch | None:
        """The batch created for `token` (at or after `since`, of `count` requests), if any."""

    async def upload(self, jsonl: bytes, filename: str) -> str:
        """Where the provider holds the input before its batch is created."""

    async def create(self, *, file_id: str, jsonl: bytes, endpoint: str, token: str) -> ProviderBatch: ...

    async def get(self, batch_id: str) -> ProviderBatch: ...

    async def cancel(self, batch_id: str) -> None: ...

    async def result_lines(self, batch: ProviderBatch) -> list[bytes]:
        """The ended batch's output and error lines (OpenAI's shape)."""


def _batch(body: Mapping[str, Any]) -> ProviderBatch:
    counts = body.get("request_counts") or {}
    errors = body.get("errors") or {}
    return ProviderBatch(
        id=str(body["id"]),
        status=str(body.get("status", "")),
        completed=int(counts.get("completed") or 0),
        failed=int(counts.get("failed") or 0),
        output_file_id=body.get("output_file_id") or None,
        error_file_id=body.get("error_file_id") or None,
        errors=list(errors.get("data") or []) if isinstance(errors, dict) else [],
    )


class OpenAIBatches(BatchAPI):
    """One provider's batch API; `session` is shared with the scheduler's other provider calls."""

    def __init__(self, provider: ProviderConfig, session: aiohttp.ClientSession, timeout_s: float) -> None:
        self._base = provider.base_url.rstrip("/")
        self.headers = {"Authorization": f"Bearer {provider.api_keys[0]}"} if provider.api_keys else {}
        self._session = session
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)

    async def call(self, method: str, path: str, *, url: str = "", **kwargs: Any) -> bytes:
        """The answer's body; `url` instead of the base URL + `path` when given."""
        try:
            async with self._session.request(
                method, url or self._base + path, headers=self.headers, timeout=self._timeout, **kwargs
            ) as response:
                body = await response.read()
                if response.status >= 400:
                    retryable = response.status in RETRYABLE_STATUS or response.status >= 500
                    text = body[:500].decode(errors="replace")
                    raise ProviderError(
                        f"{method} {path}: HTTP {response.status}: {text}", retryable=retryable
                    )
                return body
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise ProviderError(f"{method} {path}: {type(exc).__name__}: {exc}", retryable=True) from exc

    async def json(self, method: str, path: str, **kwargs: Any) -> Any:
        body = await self.call(method, path, **kwargs)
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise ProviderError(f"{method} {path}: not JSON", retryable=True) from exc

    async def upload(self, jsonl: bytes, filename: str) -> str:
        form = aiohttp.FormData()
        form.add_field("purpose", "batch")
        form.add_field("file", jsonl, filename=filename, content_type="application/jsonl")
        return str((await self.json("POST", "/files", data=form))["id"])

    async def create(self, *, file_id: str, jsonl: bytes, endpoint: str, token: str) -> ProviderBatch:
        body = {
            "input_file_id": file_id,
            "endpoint": endpoint,
            "completion_window": "24h",
            "metadata": {TOKEN_KEY: token},
        }
        return _batch(await self.json("POST", "/batches", json=body))

    async def find(self, token: str, *, since: float, count: int) -> ProviderBatch | None:
        """The provider batch tagged with `token` in its metadata, if one was created."""
        after: str | None = None
        for _ in range(LIST_PAGES_MAX):
            params = {"limit": str(LIST_PAGE), **({"after": after} if after else {})}
            page = await self.json("GET", "/batches", params=params)
            for body in page.get("data") or ():
                if (body.get("metadata") or {}).get(TOKEN_KEY) == token:
                    return _batch(body)
            if not page.get("has_more") or not page.get("data"):
                return None
            after = str(page["data"][-1]["id"])
        return None

    async def get(self, batch_id: str) -> ProviderBatch:
        return _batch(await self.json("GET", f"/batches/{batch_id}"))

    async def cancel(self, batch_id: str) -> None:
        await self.json("POST", f"/batches/{batch_id}/cancel")

    async def result_lines(self, batch: ProviderBatch) -> list[bytes]:
        lines: list[bytes] = []
        for file_id in (batch.output_file_id, batch.error_file_id):
            if file_id:
                lines += (await self.call("GET", f"/files/{file_id}/content")).splitlines()
        return lines
