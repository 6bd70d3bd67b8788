"""A small synchronous client for batchgate's REST API: OpenAI's Files and Batches API through Envoy.

The `batchgate batches|files` verbs use it. It speaks the same HTTP as the `openai` SDK (bearer
key, multipart upload, JSON bodies, streamed downloads), so the CLI exercises exactly what users
hit. Every failure becomes an `ApiFailure` that carries the HTTP status, the OpenAI error object
and the exit code the CLI ends with.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import quote

import httpx

from batchgate.exit_codes import CommandError, ExitCode

DOWNLOAD_CHUNK = 1024 * 1024


class ApiFailure(CommandError):
    """The API answered an error (or could not be reached: `status` is None)."""

    def __init__(self, status: int | None, message: str, error: dict[str, Any] | None = None) -> None:
        code = ExitCode.OTHER if status is None else ExitCode.for_http_status(status)
        super().__init__(code, message)
        self.status = status
        self.error = error or {}


def _failure(response: httpx.Response) -> ApiFailure:
    try:
        error = response.json().get("error") or {}
    except ValueError:
        error = {}
    if not isinstance(error, dict):
        error = {"message": str(error)}
    text = error.get("message") or response.text.strip() or response.reason_phrase
    label = f"{response.status_code} {error['code']}" if error.get("code") else str(response.status_code)
    return ApiFailure(response.status_code, f"({label}) {text}", error)


def _segment(ident: str) -> str:
    return quote(ident, safe="")


class ApiClient:
    """One connection pool to one gateway with one API key."""

    def __init__(self, base_url: str, api_key: str, timeout_s: float = 60.0) -> None:
        self.base_url = base_url.rstrip("/")
        self._http = httpx.Client(
            base_url=self.base_url,
            headers={"Authorization": f"Bearer {api_key}", "User-Agent": "batchgate-cli"},
            timeout=httpx.Timeout(timeout_s),
        )

    def __enter__(self) -> ApiClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.close()

    @contextlib.contextmanager
    def _reachable(self) -> Iterator[None]:
        try:
            yield
        except httpx.HTTPError as exc:
            raise ApiFailure(None, f"cannot reach {self.base_url}: {exc}") from None

    def _call(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        with self._reachable():
            response = self._http.request(method, path, **kwargs)
        if response.is_error:
            raise _failure(response)
        return dict(response.json())

    def _download(self, path: str, out: BinaryIO, params: dict[str, Any] | None = None) -> int:
        return self._stream(path, out.write, params)

    def _stream(
        self, path: str, write: Callable[[bytes], object], params: dict[str, Any] | None = None
    ) -> int:
        written = 0
        with self._reachable(), self._http.stream("GET", path, params=params) as response:
            if response.is_error:
                response.read()
                raise _failure(response)
            for chunk in response.iter_bytes(DOWNLOAD_CHUNK):
                write(chunk)
                written += len(chunk)
        return written

    # --- files -------------------------------------------------------------------------------

    def upload_file(
        self, path: Path, purpose: str = "batch", expires_after_s: int | None = None
    ) -> dict[str, Any]:
        fields = {"purpose": purpose}
        if expires_after_s is not None:
            fields.update(
                {"expires_after[anchor]": "created_at", "expires_after[seconds]": str(expires_after_s)}
            )
        with path.open("rb") as stream:
            files = {"file": (path.name, stream, "application/jsonl")}
            return self._call("POST", "/files", data=fields, files=files)

    def list_files(self, **query: Any) -> dict[str, Any]:
        return self._call("GET", "/files", params={k: v for k, v in query.items() if v is not None})

    def iter_files(self, purpose: str) -> Iterator[dict[str, Any]]:
        """Every file of `purpose`, newest first, page after page."""
        after = None
        while True:
            page = self.list_files(purpose=purpose, after=after)
            yield from page["data"]
            if not page.get("has_more") or not page["data"]:
                return
            after = page["data"][-1]["id"]

    def file_sha256(self, file_id: str) -> str:
        """The SHA-256 of a file's content, streamed (nothing is kept)."""
        digest = hashlib.sha256()
        self._stream(f"/files/{_segment(file_id)}/content", digest.update)
        return digest.hexdigest()

    def get_file(self, file_id: str) -> dict[str, Any]:
        return self._call("GET", f"/files/{_segment(file_id)}")

    def delete_file(self, file_id: str) -> dict[str, Any]:
        return self._call("DELETE", f"/files/{_segment(file_id)}")

    def download_file(self, file_id: str, out: BinaryIO) -> int:
        return self._download(f"/files/{_segment(file_id)}/content", out)

    # --- batches -----------------------------------------------------------------------------

    def create_batch(self, body: dict[str, Any], idempotency_key: str | None = None) -> dict[str, Any]:
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
        return self._call("POST", "/batches", json=body, headers=headers)

    def get_batch(self, batch_id: str) -> dict[str, Any]:
        return self._call("GET", f"/batches/{_segment(batch_id)}")

    def list_batches(self, **query: Any) -> dict[str, Any]:
        return self._call("GET", "/batches", params={k: v for k, v in query.items() if v is not None})

    def cancel_batch(self, batch_id: str) -> dict[str, Any]:
        return self._call("POST", f"/batches/{_segment(batch_id)}/cancel", json={})

    def retry_batch(self, batch_id: str, only: str | None, model: str | None) -> dict[str, Any]:
        body = {k: v for k, v in (("only", only), ("model", model)) if v}
        return self._call("POST", f"/batches/{_segment(batch_id)}/retry", json=body)

    def download_results(
        self, batch_id: str, out: BinaryIO, partial: bool, state: str | None, result_format: str | None = None
    ) -> int:
        params: dict[str, Any] = {"partial": "true"} if partial else {}
        if state:
            params["state"] = state
        if result_format:
            params["format"] = result_format
        return self._download(f"/batches/{_segment(batch_id)}/results", out, params)

    # --- recurring batch templates ---------------------------------------------------------

    def list_templates(self, **query: Any) -> dict[str, Any]:
        return self._call("GET", "/batch_templates", params={k: v for k, v in query.items() if v is not None})

    def get_template(self, template_id: str) -> dict[str, Any]:
        return self._call("GET", f"/batch_templates/{_segment(template_id)}")

    def update_template(self, template_id: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._call("POST", f"/batch_templates/{_segment(template_id)}", json=body)

    def template_action(self, template_id: str, action: str) -> dict[str, Any]:
        """`pause` or `resume`."""
        return self._call("POST", f"/batch_templates/{_segment(template_id)}/{action}", json={})

    def delete_template(self, template_id: str) -> dict[str, Any]:
        return self._call("DELETE", f"/batch_templates/{_segment(template_id)}")

    # --- usage -------------------------------------------------------------------------------

    def usage(self, **query: Any) -> dict[str, Any]:
        return self._call("GET", "/usage", params={k: v for k, v in query.items() if v})


def save_to(path: Path, fetch: Any) -> int:
    """Run `fetch(stream)` into `path` atomically: a failed download leaves no partial file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".part")
    try:
        with partial.open("wb") as out:
            written = int(fetch(out))
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)
    return written
