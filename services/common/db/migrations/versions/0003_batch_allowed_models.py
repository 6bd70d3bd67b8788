"""batches.allowed_models: the models the creating key's policy allowed at create

The executor holds a record's fallbacks to them: a model's configured fallbacks had run for a
project whose `--allow-models` did not allow them. Null (every batch created before) allows any
model, as before.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("batches", sa.Column("allowed_models", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("batches", "allowed_models")
