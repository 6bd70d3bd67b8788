"""The simplest submission: a batch-level `model` and `requests` of bare chat bodies.

    POST /v1/batches
    {"model": "gpt-4o-mini", "name": "nightly eval",
     "requests": [{"messages": [...]}, {"custom_id": "q2", "messages": [...], "temperature": 0}]}

With a batch-level `model`, `endpoint` defaults to `/v1/chat/completions` and
`completion_window` to `24h`, and each inline row that has none of `method`, `url`, `body` is
the request body itself: `custom_id` (default `row-N`, N counted from 1) is taken out and the
rest sent as the body, with the batch's model unless the row names one. Every record, in any
form and from a file too, must then use the batch's model: another is rejected alone as
`model_mismatch`, as a mixed batch always is.
"""

from __future__ import annotations

from typing import Any

from batchgate.services.common import errors
from batchgate.services.common.config import Settings
from batchgate.v1 import batches_pb2

DEFAULT_ENDPOINT = "/v1/chat/completions"
DEFAULT_WINDOW = "24h"
NAME_MAX_CHARS = 256
WRAPPER_KEYS = frozenset({"method", "url", "body"})


def apply_defaults(request: batches_pb2.CreateBatchRequest) -> None:
    """Fill the defaults of a request with a batch-level model (`create_checks.check_request`
    then checks the endpoint, the model and the name)."""
    if not request.model:
        return
    request.endpoint = request.endpoint or DEFAULT_ENDPOINT
    request.completion_window = request.completion_window or DEFAULT_WINDOW


def check_model(settings: Settings, request: batches_pb2.CreateBatchRequest) -> None:
    """400 `model_not_found` naming `model` when the batch-level model is not offered for the
    request's endpoint (which `check_request` has checked first)."""
    if not request.model:
        return
    offered = settings.model(request.model)
    if offered is None or request.endpoint not in offered.served_endpoints:
        raise errors.invalid(
            f"The model {request.model!r} is not offered by this gateway for {request.endpoint}.",
            "model_not_found",
            "model",
        )


def check_name(request: batches_pb2.CreateBatchRequest) -> None:
    """400 `invalid_name` for a name too long to keep, or holding NUL (which PostgreSQL refuses
    in text)."""
    if len(request.name) > NAME_MAX_CHARS:
        raise errors.invalid(f"'name' may be at most {NAME_MAX_CHARS} characters.", "invalid_name", "name")
    if "\x00" in request.name:
        raise errors.invalid("'name' must not contain NUL characters.", "invalid_name", "name")


def is_bare(row: Any) -> bool:
    """A row that is a request body itself (no `method`, `url` or `body` wrapper)."""
    return isinstance(row, dict) and not WRAPPER_KEYS & row.keys()


def bare_record(index: int, row: dict[str, Any], endpoint: str, model: str) -> dict[str, Any]:
    """The input-file record of the bare row at `index` (0-based) of a batch of `model`."""
    body = {key: value for key, value in row.items() if key != "custom_id"}
    return {
        "custom_id": row.get("custom_id") or f"row-{index + 1}",
        "method": "POST",
        "url": endpoint,
        "body": {"model": model, **body},
    }
