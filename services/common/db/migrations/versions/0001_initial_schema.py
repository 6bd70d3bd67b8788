"""initial schema

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "batch_templates",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("project_id", sa.String(length=40), nullable=False),
        sa.Column("api_key_id", sa.String(length=40), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("paused_reason", sa.String(length=40), nullable=True),
        sa.Column("cron", sa.String(length=200), nullable=False),
        sa.Column("cron_timezone", sa.String(length=64), nullable=False),
        sa.Column("next_run_at", sa.Float(), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("input_file_id", sa.String(length=40), nullable=False),
        sa.Column("endpoint", sa.String(length=64), nullable=False),
        sa.Column("create_request", sa.LargeBinary(), nullable=False),
        sa.Column("last_run_at", sa.Float(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("batch_templates", schema=None) as batch_op:
        batch_op.create_index("ix_batch_templates_due", ["status", "next_run_at"], unique=False)
        batch_op.create_index("ix_batch_templates_project_id", ["project_id", "id"], unique=False)

    op.create_table(
        "batches",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("project_id", sa.String(length=40), nullable=False),
        sa.Column("api_key_id", sa.String(length=40), nullable=False),
        sa.Column("endpoint", sa.String(length=64), nullable=False),
        sa.Column("input_file_id", sa.String(length=40), nullable=False),
        sa.Column("completion_window", sa.String(length=16), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("end_status", sa.String(length=16), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("expires_at", sa.Float(), nullable=False),
        sa.Column("in_progress_at", sa.Float(), nullable=True),
        sa.Column("finalizing_at", sa.Float(), nullable=True),
        sa.Column("completed_at", sa.Float(), nullable=True),
        sa.Column("failed_at", sa.Float(), nullable=True),
        sa.Column("expired_at", sa.Float(), nullable=True),
        sa.Column("cancelling_at", sa.Float(), nullable=True),
        sa.Column("cancelled_at", sa.Float(), nullable=True),
        sa.Column("output_file_id", sa.String(length=40), nullable=True),
        sa.Column("error_file_id", sa.String(length=40), nullable=True),
        sa.Column("rejected_file_id", sa.String(length=40), nullable=True),
        sa.Column("errors", sa.Text(), nullable=True),
        sa.Column("metadata", sa.Text(), nullable=True),
        sa.Column("model", sa.String(length=200), nullable=True),
        sa.Column("priority_tier", sa.Integer(), server_default="0", nullable=False),
        sa.Column("priority", sa.Integer(), server_default="0", nullable=False),
        sa.Column("priority_spelling", sa.String(length=40), nullable=True),
        sa.Column("total", sa.Integer(), server_default="0", nullable=False),
        sa.Column("rejected_count", sa.Integer(), server_default="0", nullable=False),
        sa.Column("completed_count", sa.Integer(), server_default="0", nullable=False),
        sa.Column("failed_count", sa.Integer(), server_default="0", nullable=False),
        sa.Column("input_tokens", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("cached_tokens", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("output_tokens", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("reasoning_tokens", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("cost_usd", sa.Float(), server_default="0", nullable=False),
        sa.Column("discount", sa.Float(), server_default="0", nullable=False),
        sa.Column("hold_usd", sa.Float(), server_default="0", nullable=False),
        sa.Column("webhook_url", sa.String(length=2048), nullable=True),
        sa.Column("output_expires_after_s", sa.Integer(), nullable=True),
        sa.Column("traceparent", sa.String(length=64), nullable=True),
        sa.Column("execution", sa.String(length=16), server_default="execute", nullable=False),
        sa.Column("native_completed", sa.Integer(), server_default="0", nullable=False),
        sa.Column("native_failed", sa.Integer(), server_default="0", nullable=False),
        sa.Column("name", sa.String(length=256), nullable=True),
        sa.Column("finalize_lease_until", sa.Float(), nullable=True),
        sa.Column("purged_at", sa.Float(), nullable=True),
        sa.Column("template_id", sa.String(length=40), nullable=True),
        sa.Column("retry_of", sa.String(length=40), nullable=True),
        sa.Column("retry_selection", sa.String(length=240), nullable=True),
        sa.Column("lease_cursor", sa.Integer(), server_default="0", nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("batches", schema=None) as batch_op:
        batch_op.create_index("ix_batches_project_id", ["project_id", "id"], unique=False)
        batch_op.create_index("ix_batches_retry_of", ["retry_of", "retry_selection"], unique=False)
        batch_op.create_index("ix_batches_status", ["status"], unique=False)
        batch_op.create_index("ix_batches_template_id", ["template_id", "id"], unique=False)

    op.create_table(
        "blobs",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("size", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("complete", sa.Boolean(), server_default=sa.text("(false)"), nullable=False),
        sa.Column("owner", sa.String(length=80), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("blobs", schema=None) as batch_op:
        batch_op.create_index("ix_blobs_owner", ["owner"], unique=False)

    op.create_table(
        "executor_sessions",
        sa.Column("id", sa.String(length=80), nullable=False),
        sa.Column("started_at", sa.Float(), nullable=False),
        sa.Column("expires_at", sa.Float(), nullable=False),
        sa.Column("lapsed_at", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_table(
        "files",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("project_id", sa.String(length=40), nullable=False),
        sa.Column("filename", sa.String(length=512), nullable=False),
        sa.Column("purpose", sa.String(length=32), nullable=False),
        sa.Column("bytes", sa.BigInteger(), nullable=False),
        sa.Column("line_count", sa.Integer(), server_default="0", nullable=False),
        sa.Column("blob_id", sa.String(length=40), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("expires_at", sa.Float(), nullable=True),
        sa.Column("batch_id", sa.String(length=40), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("files", schema=None) as batch_op:
        batch_op.create_index("ix_files_expires_at", ["expires_at"], unique=False)
        batch_op.create_index("ix_files_project_id", ["project_id", "id"], unique=False)

    op.create_table(
        "idempotency_keys",
        sa.Column("project_id", sa.String(length=40), nullable=False),
        sa.Column("key", sa.String(length=512), nullable=False),
        sa.Column("request_hash", sa.String(length=64), nullable=False),
        sa.Column("batch_id", sa.String(length=40), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("project_id", "key"),
    )
    op.create_table(
        "items",
        sa.Column("batch_id", sa.String(length=40), nullable=False),
        sa.Column("idx", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("line", sa.Integer(), nullable=False),
        sa.Column("custom_id", sa.String(length=512), nullable=True),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("attempt", sa.Integer(), server_default="0", nullable=False),
        sa.Column("leased_by", sa.String(length=80), nullable=True),
        sa.Column("lease_request", sa.String(length=40), nullable=True),
        sa.Column("body", sa.LargeBinary(), nullable=True),
        sa.Column("traceparent", sa.String(length=64), nullable=True),
        sa.Column("status_code", sa.Integer(), nullable=True),
        sa.Column("response", sa.LargeBinary(), nullable=True),
        sa.Column("request_id", sa.String(length=200), nullable=True),
        sa.Column("error_code", sa.String(length=64), nullable=True),
        sa.Column("error_message", sa.Text(), nullable=True),
        sa.Column("model_used", sa.String(length=200), nullable=True),
        sa.Column("provider", sa.String(length=80), nullable=True),
        sa.Column("prompt_tokens", sa.Integer(), server_default="0", nullable=False),
        sa.Column("completion_tokens", sa.Integer(), server_default="0", nullable=False),
        sa.Column("cached_tokens", sa.Integer(), server_default="0", nullable=False),
        sa.Column("reasoning_tokens", sa.Integer(), server_default="0", nullable=False),
        sa.Column("cost_usd", sa.Float(), server_default="0", nullable=False),
        sa.Column("attempts", sa.Integer(), server_default="0", nullable=False),
        sa.Column("latency_ms", sa.Integer(), nullable=True),
        sa.Column("finished_at", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("batch_id", "idx"),
    )
    with op.batch_alter_table("items", schema=None) as batch_op:
        batch_op.create_index(
            "ix_items_leased",
            ["leased_by"],
            unique=False,
            sqlite_where=sa.text("state = 'leased'"),
            postgresql_where=sa.text("state = 'leased'"),
        )
        batch_op.create_index(
            "ix_items_queued",
            ["batch_id", "idx"],
            unique=False,
            sqlite_where=sa.text("state = 'queued'"),
            postgresql_where=sa.text("state = 'queued'"),
        )

    op.create_table(
        "native_batches",
        sa.Column("token", sa.String(length=40), nullable=False),
        sa.Column("batch_id", sa.String(length=40), nullable=False),
        sa.Column("part", sa.Integer(), nullable=False),
        sa.Column("first_idx", sa.Integer(), nullable=False),
        sa.Column("end_idx", sa.Integer(), nullable=False),
        sa.Column("provider", sa.String(length=80), nullable=False),
        sa.Column("provider_file_id", sa.String(length=200), nullable=True),
        sa.Column("provider_batch_id", sa.String(length=200), nullable=True),
        sa.Column("provider_status", sa.String(length=32), nullable=True),
        sa.Column("completed", sa.Integer(), server_default="0", nullable=False),
        sa.Column("failed", sa.Integer(), server_default="0", nullable=False),
        sa.Column("cancel_sent", sa.Boolean(), server_default=sa.text("(false)"), nullable=False),
        sa.Column("imported", sa.Boolean(), server_default=sa.text("(false)"), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("poll_interval_s", sa.Float(), nullable=False),
        sa.Column("next_poll_at", sa.Float(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("token"),
    )
    with op.batch_alter_table("native_batches", schema=None) as batch_op:
        batch_op.create_index("ix_native_batches_batch", ["batch_id", "part"], unique=True)

    op.create_table(
        "projects",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("budget_usd", sa.Float(), nullable=True),
        sa.Column("webhook_secret", sa.String(length=80), nullable=False),
        sa.Column("policy", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_table(
        "rate_budgets",
        sa.Column("key_id", sa.String(length=64), nullable=False),
        sa.Column("requests_per_minute", sa.Float(), nullable=False),
        sa.Column("tokens_per_minute", sa.Float(), nullable=False),
        sa.Column("requests", sa.Float(), nullable=False),
        sa.Column("tokens", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("key_id"),
    )
    op.create_table(
        "usage_events",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("project_id", sa.String(length=40), nullable=False),
        sa.Column("api_key_id", sa.String(length=40), nullable=False),
        sa.Column("batch_id", sa.String(length=40), nullable=False),
        sa.Column("item_idx", sa.Integer(), nullable=False),
        sa.Column("model", sa.String(length=200), nullable=False),
        sa.Column("input_tokens", sa.Integer(), nullable=False),
        sa.Column("cached_tokens", sa.Integer(), nullable=False),
        sa.Column("output_tokens", sa.Integer(), nullable=False),
        sa.Column("reasoning_tokens", sa.Integer(), nullable=False),
        sa.Column("cost_usd", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("usage_events", schema=None) as batch_op:
        batch_op.create_index("ix_usage_batch", ["batch_id", "item_idx"], unique=False)
        batch_op.create_index("ix_usage_key", ["api_key_id"], unique=False)
        batch_op.create_index("ix_usage_project_time", ["project_id", "created_at"], unique=False)

    op.create_table(
        "webhook_deliveries",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("event_id", sa.String(length=40), nullable=False),
        sa.Column("batch_id", sa.String(length=40), nullable=False),
        sa.Column("project_id", sa.String(length=40), nullable=False),
        sa.Column("url", sa.String(length=2048), nullable=False),
        sa.Column("event_type", sa.String(length=40), nullable=False),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), server_default="0", nullable=False),
        sa.Column("last_status_code", sa.Integer(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("next_attempt_at", sa.Float(), nullable=True),
        sa.Column("delivered_at", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("event_id"),
    )
    with op.batch_alter_table("webhook_deliveries", schema=None) as batch_op:
        batch_op.create_index("ix_webhooks_batch", ["batch_id"], unique=False)
        batch_op.create_index("ix_webhooks_due", ["status", "next_attempt_at"], unique=False)

    op.create_table(
        "api_keys",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("project_id", sa.String(length=40), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("key_hash", sa.String(length=64), nullable=False),
        sa.Column("key_prefix", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("revoked_at", sa.Float(), nullable=True),
        sa.Column("budget_usd", sa.Float(), nullable=True),
        sa.Column("policy", sa.Text(), nullable=True),
        sa.Column("scopes", sa.String(length=200), nullable=True),
        sa.Column("expires_at", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("key_hash"),
    )
    op.create_table(
        "blob_chunks",
        sa.Column("blob_id", sa.String(length=40), nullable=False),
        sa.Column("seq", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(["blob_id"], ["blobs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("blob_id", "seq"),
    )
    op.create_table(
        "webhook_attempts",
        sa.Column("delivery_id", sa.Integer(), nullable=False),
        sa.Column("attempt", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("started_at", sa.Float(), nullable=False),
        sa.Column("finished_at", sa.Float(), nullable=True),
        sa.Column("status_code", sa.Integer(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(["delivery_id"], ["webhook_deliveries.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("delivery_id", "attempt"),
    )


def downgrade() -> None:
    op.drop_table("webhook_attempts")
    op.drop_table("blob_chunks")
    op.drop_table("api_keys")
    with op.batch_alter_table("webhook_deliveries", schema=None) as batch_op:
        batch_op.drop_index("ix_webhooks_due")
        batch_op.drop_index("ix_webhooks_batch")

    op.drop_table("webhook_deliveries")
    with op.batch_alter_table("usage_events", schema=None) as batch_op:
        batch_op.drop_index("ix_usage_project_time")
        batch_op.drop_index("ix_usage_key")
        batch_op.drop_index("ix_usage_batch")

    op.drop_table("usage_events")
    op.drop_table("rate_budgets")
    op.drop_table("projects")
    with op.batch_alter_table("native_batches", schema=None) as batch_op:
        batch_op.drop_index("ix_native_batches_batch")

    op.drop_table("native_batches")
    with op.batch_alter_table("items", schema=None) as batch_op:
        batch_op.drop_index(
            "ix_items_queued",
            sqlite_where=sa.text("state = 'queued'"),
            postgresql_where=sa.text("state = 'queued'"),
        )
        batch_op.drop_index(
            "ix_items_leased",
            sqlite_where=sa.text("state = 'leased'"),
            postgresql_where=sa.text("state = 'leased'"),
        )

    op.drop_table("items")
    op.drop_table("idempotency_keys")
    with op.batch_alter_table("files", schema=None) as batch_op:
        batch_op.drop_index("ix_files_project_id")
        batch_op.drop_index("ix_files_expires_at")

    op.drop_table("files")
    op.drop_table("executor_sessions")
    with op.batch_alter_table("blobs", schema=None) as batch_op:
        batch_op.drop_index("ix_blobs_owner")

    op.drop_table("blobs")
    with op.batch_alter_table("batches", schema=None) as batch_op:
        batch_op.drop_index("ix_batches_template_id")
        batch_op.drop_index("ix_batches_status")
        batch_op.drop_index("ix_batches_retry_of")
        batch_op.drop_index("ix_batches_project_id")

    op.drop_table("batches")
    with op.batch_alter_table("batch_templates", schema=None) as batch_op:
        batch_op.drop_index("ix_batch_templates_project_id")
        batch_op.drop_index("ix_batch_templates_due")

    op.drop_table("batch_templates")
