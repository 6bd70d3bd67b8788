"""Batch rows → Anthropic's MessageBatch object, exactly as the `anthropic` SDK types it.

- `processing_status`: `ended` once the batch reached a terminal status; `canceling` while a
  cancel is being applied (including the finalizing that follows it); else `in_progress`.
- `request_counts` always sum to the batch's requests: `succeeded`, `errored` (refused at
  create or failed after retries), `canceled`, `expired`, and `processing` for the rest.
- Timestamps are RFC 3339 (UTC, `Z`); `results_url` is absolute once ended, built from
  `public_base_url`, else from the request's own scheme and Host (passed on by Envoy as
  `x-bg-origin`), else from the gateway's address.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from batchgate.services.common import proto_values as pv
from batchgate.services.common.config import Settings
from batchgate.services.common.db import AnyRow
from batchgate.services.common.states import BATCH_TERMINAL, BatchStatus, ItemState
from batchgate.v1 import message_batches_pb2 as mb

ORIGIN_METADATA_KEY = "x-bg-origin"
IN_PROGRESS, CANCELING, ENDED = "in_progress", "canceling", "ended"  # Anthropic's processing_status
END_COLUMNS = ("completed_at", "cancelled_at", "expired_at", "failed_at")


def rfc3339(seconds: float) -> str:
    """Unix seconds as RFC 3339 in UTC, to the millisecond."""
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _stamp(seconds: float | None) -> Any:
    return pv.string_or_null(None if seconds is None else rfc3339(seconds))


def processing_status(row: AnyRow) -> str:
    if row.status in BATCH_TERMINAL:
        return ENDED
    if row.status == BatchStatus.CANCELLING or row.end_status == BatchStatus.CANCELLED:
        return CANCELING
    return IN_PROGRESS


def request_counts(row: AnyRow, states: Counter[str] | None) -> mb.MessageBatchRequestCounts:
    """The counts from the batch's counters, or from its items' states when it has failures."""
    if states is None:
        succeeded, errored, canceled, expired = row.completed_count, 0, 0, 0
    else:
        succeeded = states[ItemState.SUCCEEDED]
        errored = states[ItemState.FAILED] + states[ItemState.REJECTED]
        canceled, expired = states[ItemState.CANCELLED], states[ItemState.EXPIRED]
    done = succeeded + errored + canceled + expired
    return mb.MessageBatchRequestCounts(
        processing=max(row.total - done, 0),
        succeeded=succeeded,
        errored=errored,
        canceled=canceled,
        expired=expired,
    )


def origin(settings: Settings, metadata: Iterable[tuple[str, str | bytes]]) -> str:
    """Where clients reach this gateway: `public_base_url`, else the request's own origin."""
    if settings.public_base_url:
        return settings.public_base_url.rstrip("/")
    for name, value in metadata:
        if name == ORIGIN_METADATA_KEY and value:
            text = value.decode("latin-1") if isinstance(value, bytes) else value
            if text.startswith(("http://", "https://")) and not text.endswith("://"):
                return text.rstrip("/")
    return settings.base_url.rstrip("/")


def results_url(base: str, batch_id: str) -> str:
    return f"{base}/v1/messages/batches/{batch_id}/results"


def message_batch(row: AnyRow, states: Counter[str] | None, base: str) -> mb.MessageBatch:
    """The MessageBatch of a batch row; `states` its items per state (None: no failures),
    `base` the gateway's origin for `results_url`."""
    status = processing_status(row)
    ended_at = next((getattr(row, c) for c in END_COLUMNS if getattr(row, c) is not None), None)
    return mb.MessageBatch(
        id=row.id,
        type="message_batch",
        processing_status=status,
        request_counts=request_counts(row, states),
        ended_at=_stamp(ended_at if status == ENDED else None),
        created_at=rfc3339(row.created_at),
        expires_at=rfc3339(row.expires_at),
        archived_at=pv.null(),
        cancel_initiated_at=_stamp(row.cancelling_at),
        results_url=pv.string_or_null(results_url(base, row.id) if status == ENDED else None),
    )
