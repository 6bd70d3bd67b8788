"""Every table, with the service that owns it.

Ownership (DESIGN.md §4): a table is written by its owner only; where two services touch one
table, each writes only its own columns and transitions, as noted per table. Queries are
SQLAlchemy Core (no ORM): the hot paths are batched statements over many rows.

Times are unix seconds as doubles (`time.time()`); the public API prints them as integers.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    text,
)

metadata = MetaData()

# --- owned by ingest -------------------------------------------------------------------------

projects = Table(
    "projects",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("name", String(200), nullable=False),
    Column("created_at", Float, nullable=False),
    Column("budget_usd", Float, nullable=True),  # spend cap for the whole project; null = none
    Column("webhook_secret", String(80), nullable=False),  # HMAC key for this project's webhooks
    Column("policy", Text, nullable=True),  # access_policy.Policy as JSON; null = no limits
)

api_keys = Table(
    "api_keys",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("project_id", String(40), ForeignKey("projects.id"), nullable=False),
    Column("name", String(200), nullable=False),
    Column("key_hash", String(64), nullable=False, unique=True),  # sha256 hex of the secret
    Column("key_prefix", String(16), nullable=False),  # shown in listings, e.g. "bg-1a2b3c"
    Column("created_at", Float, nullable=False),
    Column("revoked_at", Float, nullable=True),
    Column("budget_usd", Float, nullable=True),  # spend cap for this key; null = none
    Column("policy", Text, nullable=True),  # narrows the project's policy; null = as the project
    Column("scopes", String(200), nullable=True),  # space-separated; null = every scope
    Column("expires_at", Float, nullable=True),  # refused (and its batches stopped) from then on
)

# Input files are written by ingest; results inserts the `batch_output` files it produces
# (and nothing else). Content lives in `blobs`.
files = Table(
    "files",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("project_id", String(40), nullable=False),
    Column("filename", String(512), nullable=False),
    Column("purpose", String(32), nullable=False),
    Column("bytes", BigInteger, nullable=False),
    Column("line_count", Integer, nullable=False, server_default="0"),
    Column("blob_id", String(40), nullable=False),
    Column("status", String(16), nullable=False),
    Column("created_at", Float, nullable=False),
    Column("expires_at", Float, nullable=True),
    Column("batch_id", String(40), nullable=True),  # the batch that produced an output file
    Index("ix_files_project_id", "project_id", "id"),
    Index("ix_files_expires_at", "expires_at"),
)

# Create, metadata and the validating→in_progress/failed transitions are ingest's; the
# scheduler owns in_progress→cancelling, the cancel/expiry marks (`end_status`) and the lease
# cursor; results owns →finalizing→completed|expired|cancelled, the file ids and the folded
# progress counters (the scheduler adds cancelled/expired items to `failed_count` in the same
# transaction as it marks them).
batches = Table(
    "batches",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("project_id", String(40), nullable=False),
    Column("api_key_id", String(40), nullable=False),
    Column("endpoint", String(64), nullable=False),
    Column("input_file_id", String(40), nullable=False),
    Column("completion_window", String(16), nullable=False),
    Column("status", String(16), nullable=False),
    Column("end_status", String(16), nullable=True),  # completed|cancelled|expired once decided
    Column("created_at", Float, nullable=False),
    Column("expires_at", Float, nullable=False),
    Column("in_progress_at", Float, nullable=True),
    Column("finalizing_at", Float, nullable=True),
    Column("completed_at", Float, nullable=True),
    Column("failed_at", Float, nullable=True),
    Column("expired_at", Float, nullable=True),
    Column("cancelling_at", Float, nullable=True),
    Column("cancelled_at", Float, nullable=True),
    Column("output_file_id", String(40), nullable=True),
    Column("error_file_id", String(40), nullable=True),
    Column("rejected_file_id", String(40), nullable=True),
    Column("errors", Text, nullable=True),  # JSON list of {code, message, param, line}
    Column("metadata", Text, nullable=True),  # JSON object
    Column("model", String(200), nullable=True),
    Column("priority_tier", Integer, nullable=False, server_default="0"),  # 1 = expedited
    Column("priority", Integer, nullable=False, server_default="0"),  # higher runs first
    Column("priority_spelling", String(40), nullable=True),  # JSON of what the client sent
    Column("total", Integer, nullable=False, server_default="0"),
    Column("rejected_count", Integer, nullable=False, server_default="0"),
    Column("completed_count", Integer, nullable=False, server_default="0"),
    Column("failed_count", Integer, nullable=False, server_default="0"),
    Column("input_tokens", BigInteger, nullable=False, server_default="0"),
    Column("cached_tokens", BigInteger, nullable=False, server_default="0"),
    Column("output_tokens", BigInteger, nullable=False, server_default="0"),
    Column("reasoning_tokens", BigInteger, nullable=False, server_default="0"),
    Column("cost_usd", Float, nullable=False, server_default="0"),
    Column("discount", Float, nullable=False, server_default="0"),
    # Worst-case cost held against the key's and project's budgets while the batch is open.
    Column("hold_usd", Float, nullable=False, server_default="0"),
    Column("webhook_url", String(2048), nullable=True),
    Column("output_expires_after_s", Integer, nullable=True),
    Column("traceparent", String(64), nullable=True),  # the create call's trace
    # execute (our executors) | native (the provider's batch API: `native_batches`); ingest's
    Column("execution", String(16), nullable=False, server_default="execute"),
    # The scheduler's: a native batch's provider counts not yet imported (its live progress)
    Column("native_completed", Integer, nullable=False, server_default="0"),
    Column("native_failed", Integer, nullable=False, server_default="0"),
    Column("name", String(256), nullable=True),  # what the creator called it (extension)
    # A results replica writing the files holds this lease; a lapsed one means it crashed.
    Column("finalize_lease_until", Float, nullable=True),
    # Set when retention purged its data: only this row (bookkeeping) and its usage events stay.
    Column("purged_at", Float, nullable=True),
    Column("template_id", String(40), nullable=True),  # the recurring template that spawned it
    # JSON list: the models its creating key's policy allowed at create (its records' fallbacks
    # are held to it); null: any model.
    Column("allowed_models", Text, nullable=True),
    # A retry (POST /v1/batches/{id}/retry): the batch it re-runs and what it selected
    # (`<only or all>:<model or nothing>`), one retry batch per source and selection.
    Column("retry_of", String(40), nullable=True),
    Column("retry_selection", String(240), nullable=True),
    # The scheduler's: no queued item of the batch lies below it, so leases pick from here
    # (`lease_cursors`); `lease_cursors.END` once nothing is queued.
    Column("lease_cursor", Integer, nullable=False, server_default="0"),
    Index("ix_batches_project_id", "project_id", "id"),
    Index("ix_batches_status", "status"),
    Index("ix_batches_template_id", "template_id", "id"),
    Index("ix_batches_retry_of", "retry_of", "retry_selection"),
)

# Recurring batch templates (ingest; SQL in services.common.db.templates). Each holds the
# create request its runs are made from. `next_run_at` is also the claim on a due time: the
# run's create moves it on in the same transaction that publishes the run, conditionally on
# the due time it served, so one due time makes at most one run whatever the callers.
batch_templates = Table(
    "batch_templates",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("project_id", String(40), nullable=False),
    Column("api_key_id", String(40), nullable=False),  # runs are created as this key
    Column("status", String(16), nullable=False),  # scheduled | paused
    Column("paused_reason", String(40), nullable=True),
    Column("cron", String(200), nullable=False),
    Column("cron_timezone", String(64), nullable=False),
    Column("next_run_at", Float, nullable=True),  # null while paused
    Column("created_at", Float, nullable=False),
    Column("input_file_id", String(40), nullable=False),
    Column("endpoint", String(64), nullable=False),
    Column("create_request", LargeBinary, nullable=False),  # CreateBatchRequest, serialized
    Column("last_run_at", Float, nullable=True),  # the last due time served
    Column("last_error", Text, nullable=True),  # JSON {code, message} of a refused run
    Index("ix_batch_templates_project_id", "project_id", "id"),
    Index("ix_batch_templates_due", "status", "next_run_at"),
)

# Idempotency-Key → batch, per project (ingest).
idempotency_keys = Table(
    "idempotency_keys",
    metadata,
    Column("project_id", String(40), primary_key=True),
    Column("key", String(512), primary_key=True),
    Column("request_hash", String(64), nullable=False),
    Column("batch_id", String(40), nullable=True),  # null while the first create runs
    Column("created_at", Float, nullable=False),
)

# --- shared: blob store (batchgate.services.common.storage) ----------------------------------------------

blobs = Table(
    "blobs",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("size", BigInteger, nullable=False, server_default="0"),
    Column("complete", Boolean, nullable=False, server_default=text("false")),
    Column("owner", String(80), nullable=False),  # what is writing it (cleanup of partial blobs)
    Column("created_at", Float, nullable=False),
    Index("ix_blobs_owner", "owner"),
)

blob_chunks = Table(
    "blob_chunks",
    metadata,
    Column("blob_id", String(40), ForeignKey("blobs.id", ondelete="CASCADE"), primary_key=True),
    Column("seq", Integer, primary_key=True, autoincrement=False),
    Column("data", LargeBinary, nullable=False),
)

# --- items: ingest inserts; scheduler owns queued/leased/cancelled/expired and the lease
# columns; results owns succeeded/failed and the outcome columns. -----------------------------

items = Table(
    "items",
    metadata,
    Column("batch_id", String(40), primary_key=True),
    Column("idx", Integer, primary_key=True, autoincrement=False),  # 0-based input order
    Column("line", Integer, nullable=False),  # 1-based input line, blank lines counted
    Column("custom_id", String(512), nullable=True),
    # queued | leased | succeeded | failed | cancelled | expired | rejected
    Column("state", String(16), nullable=False),
    Column("attempt", Integer, nullable=False, server_default="0"),  # lease count = fencing token
    Column("leased_by", String(80), nullable=True),  # the executor session holding the lease
    Column("lease_request", String(40), nullable=True),  # the LeaseItems call that took it
    Column("body", LargeBinary, nullable=True),  # request body JSON; null for rejected records
    Column("traceparent", String(64), nullable=True),
    # outcome
    Column("status_code", Integer, nullable=True),
    Column("response", LargeBinary, nullable=True),  # upstream body JSON
    Column("request_id", String(200), nullable=True),
    Column("error_code", String(64), nullable=True),
    Column("error_message", Text, nullable=True),
    Column("model_used", String(200), nullable=True),
    Column("provider", String(80), nullable=True),
    Column("prompt_tokens", Integer, nullable=False, server_default="0"),
    Column("completion_tokens", Integer, nullable=False, server_default="0"),
    Column("cached_tokens", Integer, nullable=False, server_default="0"),
    Column("reasoning_tokens", Integer, nullable=False, server_default="0"),
    Column("cost_usd", Float, nullable=False, server_default="0"),
    Column("attempts", Integer, nullable=False, server_default="0"),
    Column("latency_ms", Integer, nullable=True),
    Column("finished_at", Float, nullable=True),
    # Leasing walks only queued rows; without this each lease re-scans leased ones.
    Index(
        "ix_items_queued",
        "batch_id",
        "idx",
        sqlite_where=text("state = 'queued'"),
        postgresql_where=text("state = 'queued'"),
    ),
    # Rescue finds a dead session's items.
    Index(
        "ix_items_leased",
        "leased_by",
        sqlite_where=text("state = 'leased'"),
        postgresql_where=text("state = 'leased'"),
    ),
)

# --- owned by the scheduler --------------------------------------------------------------------

# One row per executor session (a process, until it is cut off for longer than a lease time).
# Its leases last as long as the session: heartbeats and lease calls move `expires_at`. When it
# lapses, maintenance queues its items again and marks it `lapsed_at` in the same transaction
# (or deletes it, when it held nothing): a lapsed session never leases again, so its executor,
# told so by its next heartbeat or lease call, drops what it held and opens a new one.
executor_sessions = Table(
    "executor_sessions",
    metadata,
    Column("id", String(80), primary_key=True),
    Column("started_at", Float, nullable=False),
    Column("expires_at", Float, nullable=False),
    Column("lapsed_at", Float, nullable=True),
)

# Per provider key, the deployment's token buckets (requests and tokens per minute), from
# which executors are granted shares. `key_id` is a hash: the secret itself is never stored.
rate_budgets = Table(
    "rate_budgets",
    metadata,
    Column("key_id", String(64), primary_key=True),
    Column("requests_per_minute", Float, nullable=False),
    Column("tokens_per_minute", Float, nullable=False),
    Column("requests", Float, nullable=False),  # level of the request bucket at `updated_at`
    Column("tokens", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
)

# One row per provider batch a natively run batch was sent as (several above the provider's
# per-batch limit, each covering the items `first_idx <= idx < end_idx`). The row is written,
# with its idempotency `token`, BEFORE the provider is called, and every provider id is stored
# as soon as it is known: a restarted scheduler finds the provider batch by the token in its
# metadata instead of creating a second one.
native_batches = Table(
    "native_batches",
    metadata,
    Column("token", String(40), primary_key=True),  # `nb_…`, also the provider batch's metadata
    Column("batch_id", String(40), nullable=False),
    Column("part", Integer, nullable=False),
    Column("first_idx", Integer, nullable=False),
    Column("end_idx", Integer, nullable=False),
    Column("provider", String(80), nullable=False),
    Column("provider_file_id", String(200), nullable=True),
    Column("provider_batch_id", String(200), nullable=True),
    Column("provider_status", String(32), nullable=True),  # as the provider last said
    Column("completed", Integer, nullable=False, server_default="0"),  # the provider's counts
    Column("failed", Integer, nullable=False, server_default="0"),
    Column("cancel_sent", Boolean, nullable=False, server_default=text("false")),
    Column("imported", Boolean, nullable=False, server_default=text("false")),  # results recorded
    Column("error", Text, nullable=True),  # the provider's error when its batch failed outright
    Column("poll_interval_s", Float, nullable=False),
    Column("next_poll_at", Float, nullable=False),
    Column("created_at", Float, nullable=False),
    Index("ix_native_batches_batch", "batch_id", "part", unique=True),
)

# --- owned by results ------------------------------------------------------------------------

EVENT_ID_TYPE = BigInteger().with_variant(Integer(), "sqlite")

usage_events = Table(
    "usage_events",
    metadata,
    # One event per item ever run: int4 ids ran out after ~2.1 billion items, and every record
    # call failed from then on. SQLite's INTEGER PRIMARY KEY is the 64-bit rowid already.
    Column("id", EVENT_ID_TYPE, primary_key=True, autoincrement=True),
    Column("created_at", Float, nullable=False),
    Column("source", String(16), nullable=False),  # "batch"
    Column("project_id", String(40), nullable=False),
    Column("api_key_id", String(40), nullable=False),
    Column("batch_id", String(40), nullable=False),
    Column("item_idx", Integer, nullable=False),
    Column("model", String(200), nullable=False),
    Column("input_tokens", Integer, nullable=False),
    Column("cached_tokens", Integer, nullable=False),
    Column("output_tokens", Integer, nullable=False),
    Column("reasoning_tokens", Integer, nullable=False),
    Column("cost_usd", Float, nullable=False),
    Index("ix_usage_project_time", "project_id", "created_at"),
    Index("ix_usage_key", "api_key_id"),
    Index("ix_usage_batch", "batch_id", "item_idx"),
)

# One row per batch event to deliver. `next_attempt_at` is also the claim: a replica that
# takes a due delivery moves it past the attempt's time limit and bumps `attempts` (the fencing
# token of that attempt), so a replica that dies mid-attempt only delays the next one.
webhook_deliveries = Table(
    "webhook_deliveries",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("event_id", String(40), nullable=False, unique=True),  # `evt_…`, the receiver's dedupe key
    Column("batch_id", String(40), nullable=False),
    Column("project_id", String(40), nullable=False),
    Column("url", String(2048), nullable=False),
    Column("event_type", String(40), nullable=False),
    Column("payload", Text, nullable=False),
    Column("status", String(16), nullable=False),  # pending | delivered | failed
    Column("attempts", Integer, nullable=False, server_default="0"),
    Column("last_status_code", Integer, nullable=True),
    Column("last_error", Text, nullable=True),
    Column("created_at", Float, nullable=False),
    Column("next_attempt_at", Float, nullable=True),
    Column("delivered_at", Float, nullable=True),
    Index("ix_webhooks_due", "status", "next_attempt_at"),
    Index("ix_webhooks_batch", "batch_id"),
)

# Every delivery attempt, written when it starts and completed when it ends (an attempt whose
# replica died keeps `finished_at` null).
webhook_attempts = Table(
    "webhook_attempts",
    metadata,
    Column("delivery_id", Integer, ForeignKey("webhook_deliveries.id", ondelete="CASCADE"), primary_key=True),
    Column("attempt", Integer, primary_key=True, autoincrement=False),
    Column("started_at", Float, nullable=False),
    Column("finished_at", Float, nullable=True),
    Column("status_code", Integer, nullable=True),
    Column("error", Text, nullable=True),
)
