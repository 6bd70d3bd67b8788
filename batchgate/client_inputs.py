"""How the CLI hands a local JSONL file to a create: uploaded as the create's input, reused
where an Idempotency-Key needs the first run's upload, or uploaded for a dry run and deleted.

The server keys an Idempotency-Key on the whole create request, `input_file_id` included, and
`POST /v1/files` has no key of its own: a re-run that uploaded again would name a new file and
be refused (422 `idempotency_key_reused`). So a create with a key first tries the project's
stored copies of the file (same name, size and SHA-256), and the server still decides between
replaying the first batch and refusing.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from batchgate import client_views as views
from batchgate.api_client import ApiClient, ApiFailure

SCRATCH_EXPIRY_S = 3600  # a dry run's upload, should the command die before deleting it


def create_from_file(api: ApiClient, path: Path, body: dict[str, Any], key: str | None) -> dict[str, Any]:
    """The batch (or template) of `body` with `path` as its input: with `key`, from a stored
    copy of `path` where the server takes one, else from a new upload. Two runs at once may
    both upload; the one the server refuses then answers with the other's batch."""
    if key is not None:
        replayed = _create_from_stored_copy(api, path, body, key)
        if replayed is not None:
            return replayed
    try:
        return _create_from_upload(api, path, body, key)
    except ApiFailure as failure:
        if key is None or not _key_reused(failure):
            raise
        replayed = _create_from_stored_copy(api, path, body, key)
        if replayed is None:
            raise
        return replayed


def _create_from_upload(api: ApiClient, path: Path, body: dict[str, Any], key: str | None) -> dict[str, Any]:
    """Upload `path` and create from it; a create the server refused (4xx: it stored nothing)
    deletes the upload again."""
    uploaded = api.upload_file(path)
    views.note(f"uploaded {path} as {uploaded['id']} ({uploaded['bytes']} bytes)")
    try:
        return api.create_batch({**body, "input_file_id": uploaded["id"]}, key)
    except ApiFailure as failure:
        if failure.status is not None and failure.status < 500:
            _delete_upload(api, uploaded["id"])
        raise


def _create_from_stored_copy(
    api: ApiClient, path: Path, body: dict[str, Any], key: str
) -> dict[str, Any] | None:
    """The create with `key` from the newest stored copy of `path` that the server takes (the
    one an earlier run with `key` used answers its batch); None when there is no stored copy.
    Raises the server's 422 when the key was used for another request."""
    refused: ApiFailure | None = None
    for file_id in _stored_copies(api, path):
        try:
            batch = api.create_batch({**body, "input_file_id": file_id}, key)
        except ApiFailure as failure:
            if _key_reused(failure):
                refused = failure  # with another file, or other parameters: try the next copy
                continue
            if failure.status == 404:
                continue  # deleted meanwhile
            raise
        views.note(f"{path} is already uploaded as {file_id}; created with it")
        return batch
    if refused is not None:
        raise refused
    return None


def _stored_copies(api: ApiClient, path: Path) -> Iterator[str]:
    """The ids of this project's batch files with `path`'s name and content, newest first."""
    size = path.stat().st_size
    digest = None
    for file in api.iter_files(purpose="batch"):
        if file.get("filename") != path.name or file.get("bytes") != size:
            continue
        if digest is None:
            with path.open("rb") as stream:
                digest = hashlib.file_digest(stream, "sha256").hexdigest()
        if api.file_sha256(file["id"]) == digest:
            yield file["id"]


def _key_reused(failure: ApiFailure) -> bool:
    return failure.status == 422 and failure.error.get("code") == "idempotency_key_reused"


def _delete_upload(api: ApiClient, file_id: str) -> None:
    """Delete a file this command uploaded for its own use; a failure is only a note."""
    try:
        api.delete_file(file_id)
    except ApiFailure as failure:
        views.note(f"could not delete the upload {file_id}: {failure}")


@contextlib.contextmanager
def scratch_upload(api: ApiClient, path: Path) -> Iterator[str]:
    """`path` uploaded for the time of the block, then deleted (it expires within the hour
    should the command die before)."""
    file_id = str(api.upload_file(path, expires_after_s=SCRATCH_EXPIRY_S)["id"])
    try:
        yield file_id
    finally:
        _delete_upload(api, file_id)
