"""Every named state the services store or compare, and which state may follow which.

The values are what the database holds (and the API prints); the enums are `StrEnum`s, so a
member compares equal to its stored string and binds as one. The lifecycles are data: the
one function that moves a batch (`batchgate.services.common.db.batches.transition`) and the tests read
`BATCH_TRANSITIONS`; `ITEM_TRANSITIONS` documents the statements in `batchgate.services.common.db.items`.

    validating ─▶ in_progress ─▶ finalizing ─▶ completed | expired | cancelled | failed (native)
        │              │              ▲
        ▼              ▼              │
      failed       cancelling ────────┘

    (inserted) queued ⇄ leased ─▶ succeeded | failed
                 │        │
                 ▼        ▼
          cancelled | expired              (inserted) rejected
"""

from __future__ import annotations

from enum import StrEnum


class BatchStatus(StrEnum):
    VALIDATING = "validating"
    IN_PROGRESS = "in_progress"
    FINALIZING = "finalizing"
    CANCELLING = "cancelling"
    COMPLETED = "completed"
    FAILED = "failed"
    EXPIRED = "expired"
    CANCELLED = "cancelled"


# Which statuses each status may be entered from (a conditional UPDATE on these).
BATCH_TRANSITIONS: dict[BatchStatus, tuple[BatchStatus, ...]] = {
    BatchStatus.IN_PROGRESS: (BatchStatus.VALIDATING,),
    # from finalizing: a natively run batch whose provider batch failed outright
    BatchStatus.FAILED: (BatchStatus.VALIDATING, BatchStatus.FINALIZING),
    BatchStatus.CANCELLING: (BatchStatus.IN_PROGRESS,),
    BatchStatus.FINALIZING: (BatchStatus.IN_PROGRESS, BatchStatus.CANCELLING),
    BatchStatus.COMPLETED: (BatchStatus.FINALIZING,),
    BatchStatus.EXPIRED: (BatchStatus.FINALIZING,),
    BatchStatus.CANCELLED: (BatchStatus.FINALIZING,),
}
BATCH_TERMINAL = (BatchStatus.FAILED, BatchStatus.COMPLETED, BatchStatus.EXPIRED, BatchStatus.CANCELLED)
BATCH_OPEN = (BatchStatus.VALIDATING, BatchStatus.IN_PROGRESS, BatchStatus.FINALIZING, BatchStatus.CANCELLING)
# Batches whose items still run (or are being closed); a cancelling one lets running items finish.
BATCH_RUNNING = (BatchStatus.IN_PROGRESS, BatchStatus.CANCELLING)
# How a batch may end once finalizing (`batches.end_status`).
BATCH_ENDS = (BatchStatus.COMPLETED, BatchStatus.EXPIRED, BatchStatus.CANCELLED, BatchStatus.FAILED)


class Execution(StrEnum):
    """How a batch's items run (`batches.execution`)."""

    EXECUTE = "execute"  # leased to batchgate's executors, request by request
    NATIVE = "native"  # passed through to the provider's batch API (`native_batches`)


class ItemState(StrEnum):
    QUEUED = "queued"
    LEASED = "leased"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    EXPIRED = "expired"
    REJECTED = "rejected"


# Which states each item state may be entered from; `queued` and `rejected` are also inserted.
ITEM_TRANSITIONS: dict[ItemState, tuple[ItemState, ...]] = {
    ItemState.LEASED: (ItemState.QUEUED,),
    ItemState.QUEUED: (ItemState.LEASED,),  # released, or rescued from a lapsed session
    ItemState.SUCCEEDED: (ItemState.LEASED,),
    ItemState.FAILED: (ItemState.LEASED,),
    ItemState.CANCELLED: (ItemState.QUEUED, ItemState.LEASED),
    ItemState.EXPIRED: (ItemState.QUEUED, ItemState.LEASED),
}
ITEM_OPEN = (ItemState.LEASED, ItemState.QUEUED)
ITEM_REPORTED = (ItemState.SUCCEEDED, ItemState.FAILED)  # outcomes an executor reported
ITEM_CLOSED = (ItemState.CANCELLED, ItemState.EXPIRED, ItemState.REJECTED)  # outcomes no executor reported
ITEM_FAILED = (ItemState.FAILED, *ITEM_CLOSED)  # what the error file holds
ITEM_FINISHED = (ItemState.SUCCEEDED, *ITEM_FAILED)


class FilePurpose(StrEnum):
    BATCH = "batch"  # an input file a client uploaded
    BATCH_OUTPUT = "batch_output"  # an output or error file results wrote


ACCEPTED_PURPOSES = (FilePurpose.BATCH,)  # what a client may upload
LISTED_PURPOSES = tuple(FilePurpose)  # what a listing may filter by


class FileStatus(StrEnum):
    PROCESSED = "processed"


class DeliveryStatus(StrEnum):
    PENDING = "pending"
    DELIVERED = "delivered"
    FAILED = "failed"


class TemplateStatus(StrEnum):
    """A recurring batch template: spawning runs, or not until it is resumed."""

    SCHEDULED = "scheduled"
    PAUSED = "paused"


class PauseReason(StrEnum):
    """Why a template is paused: the user asked, or it can make no run any more."""

    BY_USER = "paused_by_user"
    INPUT_FILE_DELETED = "input_file_deleted"
    INPUT_FILE_EXPIRED = "input_file_expired"
    API_KEY_REVOKED = "api_key_revoked"


class UsageSource(StrEnum):
    BATCH = "batch"


class ItemErrorCode(StrEnum):
    """Error codes the services themselves write into items (not an upstream's)."""

    BATCH_CANCELLED = "batch_cancelled"
    BATCH_EXPIRED = "batch_expired"
    WORKFLOW_LIMIT_EXCEEDED = "workflow_limit_exceeded"
    """A workflow asked for more steps or requests, or used more tokens, than its bounds."""
    TOOL_LIMIT_EXCEEDED = "tool_limit_exceeded"
    """A tool-calling record's next model turn could have passed its `max_tokens`."""
    WORKFLOW_CALLBACK_FAILED = "workflow_callback_failed"
    """A workflow's callback gave no usable answer after its retries."""
    WORKFLOW_FAILED = "workflow_failed"
    """A workflow's callback answered `failed`."""
    CREDENTIAL_REVOKED = "credential_revoked"
