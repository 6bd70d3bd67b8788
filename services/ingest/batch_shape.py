"""What differs between the APIs that create batches, for `BatchCreator`.

OpenAI's Batches API (`openai_shape`) and Anthropic's Message Batches
(`message_requests.message_batch_shape`) share the whole create pipeline: checks, chunked
item writes, rejections, publication, idempotency. A shape says only what differs: the
endpoints accepted, the id, how a record is checked and stored, and the limits.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from batchgate.services.common.catalogue import SUPPORTED_ENDPOINTS
from batchgate.services.common.config import Settings
from batchgate.services.common.ids import batch_id
from batchgate.services.ingest.validation import Accepted, RecordChecker, Rejected


class RecordCheck(Protocol):
    """Checks the records of one batch in order."""

    model: str | None
    """The batch's model, once a record was accepted."""

    def check(self, raw: bytes) -> Accepted | Rejected: ...


@dataclass(frozen=True, kw_only=True)
class BatchShape:
    settings: Settings
    endpoints: tuple[str, ...]
    new_id: Callable[[], str]
    checker: Callable[[str, frozenset[str] | None], RecordCheck]
    """A fresh checker for a batch to this endpoint, refusing models outside the allowed ones
    (None: every offered model) as `model_not_allowed`."""
    inline_line: Callable[[int, Any, str], bytes]
    """Inline request number `index` as the stored input line (without its newline)."""
    windows: tuple[str, ...]
    """The completion windows a batch may ask for."""
    max_records: int
    max_inline_bytes: int
    message_batch: bool = False
    """Read through the Message Batches API only (`services.common.api_shapes`)."""


def openai_shape(settings: Settings, inline_line: Callable[[int, Any, str], bytes]) -> BatchShape:
    return BatchShape(
        settings=settings,
        endpoints=SUPPORTED_ENDPOINTS,
        new_id=batch_id,
        checker=lambda endpoint, allowed: RecordChecker(settings, endpoint, allowed_models=allowed),
        inline_line=inline_line,
        windows=tuple(settings.completion_window_list),
        max_records=settings.max_batch_records,
        max_inline_bytes=settings.max_inline_bytes,
    )
