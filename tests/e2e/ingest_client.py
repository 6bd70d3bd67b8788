"""Driving ingest through Envoy two ways, the openai SDK and raw HTTP, with one answer shape.

The bad-input, idempotency and isolation suites send every case both ways: the SDK proves
what its users see (exceptions, retries), raw HTTP proves the exact wire answer.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any

import httpx
import openai

from tests.support import RunningStack, db_rows, jsonl

VIAS = ("sdk", "http")
ENDPOINT = "/v1/chat/completions"
SDK_CREATE_FIELDS = ("input_file_id", "endpoint", "completion_window", "metadata", "output_expires_after")


@dataclass(frozen=True)
class Answer:
    """An HTTP status and its decoded JSON body, however it was obtained."""

    status: int
    body: dict[str, Any]
    headers: httpx.Headers

    @property
    def error(self) -> dict[str, Any]:
        assert "error" in self.body, self.body
        return dict(self.body["error"])

    def expect_error(self, status: int, code: str) -> dict[str, Any]:
        assert (self.status, self.body.get("error", {}).get("code")) == (status, code), self.body
        assert set(self.error) >= {"message", "type", "param", "code"}
        assert self.headers["content-type"].startswith("application/json")
        return self.error


def from_file(input_file: str) -> dict[str, Any]:
    """The body of a 24h chat-completions create from an uploaded file."""
    return {"input_file_id": input_file, "endpoint": ENDPOINT, "completion_window": "24h"}


def _headers(stack: RunningStack, project: str, extra: dict[str, str] | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {stack.keys[project]}", **(extra or {})}


def create_batch(
    via: str,
    stack: RunningStack,
    params: dict[str, Any],
    project: str = "default",
    headers: dict[str, str] | None = None,
) -> Answer:
    """POST /v1/batches with `params` as the JSON body."""
    if via == "http":
        answer = httpx.post(
            f"{stack.base_url}/batches", json=params, headers=_headers(stack, project, headers), timeout=120
        )
        return Answer(answer.status_code, answer.json(), answer.headers)
    client = stack.client(project)
    known = {k: params[k] for k in SDK_CREATE_FIELDS if k in params}
    extra = {k: v for k, v in params.items() if k not in SDK_CREATE_FIELDS}
    for required in ("input_file_id", "endpoint", "completion_window"):  # the SDK insists on them
        known.setdefault(required, "")
    try:
        raw = client.batches.with_raw_response.create(
            **known, extra_body=extra or None, extra_headers=headers or None
        )
    except openai.APIStatusError as exc:
        return Answer(exc.status_code, exc.response.json(), exc.response.headers)
    return Answer(raw.http_response.status_code, raw.parse().model_dump(), raw.http_response.headers)


def upload_file(
    via: str,
    stack: RunningStack,
    content: bytes,
    project: str = "default",
    purpose: str = "batch",
    expires_after: dict[str, Any] | None = None,
) -> Answer:
    """POST /v1/files (multipart) with `content` as the file."""
    if via == "http":
        fields = {f"expires_after[{k}]": str(v) for k, v in (expires_after or {}).items()}
        answer = httpx.post(
            f"{stack.base_url}/files",
            data={"purpose": purpose, **fields},
            files={"file": ("input.jsonl", content, "application/octet-stream")},
            headers=_headers(stack, project, None),
            timeout=120,
        )
        return Answer(answer.status_code, answer.json(), answer.headers)
    client = stack.client(project)
    try:
        raw = client.files.with_raw_response.create(
            file=("input.jsonl", io.BytesIO(content)),
            purpose=purpose,  # type: ignore[arg-type]
            expires_after=expires_after or openai.omit,  # type: ignore[arg-type]
        )
    except openai.APIStatusError as exc:
        return Answer(exc.status_code, exc.response.json(), exc.response.headers)
    return Answer(raw.http_response.status_code, raw.parse().model_dump(), raw.http_response.headers)


def upload_records(
    stack: RunningStack, records: list[dict[str, Any]] | bytes, project: str = "default"
) -> str:
    data = records if isinstance(records, bytes) else jsonl(records)
    answer = upload_file("sdk", stack, data, project)
    assert answer.status == 200, answer.body
    return str(answer.body["id"])


def footprint(stack: RunningStack, project_id: str) -> dict[str, int]:
    """What a project has stored, plus anything a create or upload could leave loose.

    Output and error files of finished batches are left out: the shared stack's earlier batches
    may finish while a test runs, and they are not what a refused create or upload leaves.
    """
    row = db_rows(
        stack.database_url,
        """
        SELECT (SELECT count(*) FROM batches WHERE project_id = :p) AS batches,
               (SELECT count(*) FROM files WHERE project_id = :p AND batch_id IS NULL) AS files,
               (SELECT count(*) FROM idempotency_keys WHERE project_id = :p) AS idempotency_keys,
               (SELECT count(*) FROM items WHERE batch_id NOT IN (SELECT id FROM batches)) AS orphan_items,
               (SELECT count(*) FROM blobs
                 WHERE (owner LIKE 'upload:%' OR owner LIKE 'create:%')
                   AND id NOT IN (SELECT blob_id FROM files)) AS loose_blobs
        """,
        p=project_id,
    )[0]
    return dict(row._mapping)
