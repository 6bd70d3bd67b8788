"""access policies, key scopes and expiry, budget holds, retention (issue 17)

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("projects", sa.Column("policy", sa.Text(), nullable=True))
    op.add_column("api_keys", sa.Column("policy", sa.Text(), nullable=True))
    op.add_column("api_keys", sa.Column("scopes", sa.String(length=200), nullable=True))
    op.add_column("api_keys", sa.Column("expires_at", sa.Float(), nullable=True))
    op.add_column("batches", sa.Column("hold_usd", sa.Float(), server_default="0", nullable=False))
    op.add_column("batches", sa.Column("purged_at", sa.Float(), nullable=True))


def downgrade() -> None:
    op.drop_column("batches", "purged_at")
    op.drop_column("batches", "hold_usd")
    op.drop_column("api_keys", "expires_at")
    op.drop_column("api_keys", "scopes")
    op.drop_column("api_keys", "policy")
    op.drop_column("projects", "policy")
