"""A batch row as Anthropic's MessageBatch, checked against the anthropic SDK's own type."""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace
from typing import Any

import pytest
from anthropic.types.messages import MessageBatch
from google.protobuf import json_format

from batchgate.services.common.loading import load_settings
from batchgate.services.ingest.message_batch_views import message_batch, origin, rfc3339

CREATED = 1_767_225_600.25
BASE = "https://gw.example"


def row(**values: Any) -> Any:
    fields = {
        "id": "msgbatch_01",
        "status": "in_progress",
        "end_status": None,
        "total": 10,
        "completed_count": 0,
        "failed_count": 0,
        "created_at": CREATED,
        "expires_at": CREATED + 86400,
        "cancelling_at": None,
        "completed_at": None,
        "cancelled_at": None,
        "expired_at": None,
        "failed_at": None,
    }
    return SimpleNamespace(**{**fields, **values})


def as_sdk(message: Any) -> MessageBatch:
    data = json_format.MessageToDict(
        message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )
    return MessageBatch.model_validate(data)


CASES = [
    ("running", row(completed_count=4), None, "in_progress", (6, 4, 0, 0, 0)),
    (
        "canceling while it finalizes",
        row(
            status="finalizing",
            end_status="cancelled",
            cancelling_at=CREATED + 5,
            completed_count=4,
            failed_count=6,
        ),
        Counter(succeeded=4, cancelled=6),
        "canceling",
        (0, 4, 0, 6, 0),
    ),
    (
        "ended with every kind",
        row(status="expired", expired_at=CREATED + 9, completed_count=3, failed_count=7),
        Counter(succeeded=3, failed=1, rejected=2, cancelled=0, expired=4),
        "ended",
        (0, 3, 3, 0, 4),
    ),
]


@pytest.mark.parametrize("source, states, status, counts", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_status_and_counts(
    source: Any, states: Counter[str] | None, status: str, counts: tuple[int, ...]
) -> None:
    batch = as_sdk(message_batch(source, states, BASE))
    assert batch.processing_status == status
    c = batch.request_counts
    assert (c.processing, c.succeeded, c.errored, c.canceled, c.expired) == counts
    assert sum(counts) == source.total
    assert batch.created_at.timestamp() == pytest.approx(CREATED)
    assert (batch.ended_at is not None) == (status == "ended") == (batch.results_url is not None)
    if status == "ended":
        assert batch.results_url == f"{BASE}/v1/messages/batches/msgbatch_01/results"
        assert batch.ended_at is not None and batch.ended_at.timestamp() == pytest.approx(CREATED + 9)
    assert batch.archived_at is None


def test_timestamps_are_rfc3339_utc() -> None:
    assert rfc3339(CREATED) == "2026-01-01T00:00:00.250Z"


def test_results_url_origin_prefers_the_configured_public_url() -> None:
    request = [("x-bg-origin", "http://10.0.0.5:8080")]
    assert (
        origin(load_settings(environ={}, public_base_url="https://batch.example/"), request)
        == "https://batch.example"
    )
    assert origin(load_settings(environ={}), request) == "http://10.0.0.5:8080"
    assert origin(load_settings(environ={}, port=9000), [("x-bg-origin", "javascript:x")]).endswith(":9000")
