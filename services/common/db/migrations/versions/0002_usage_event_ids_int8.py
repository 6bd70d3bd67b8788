"""usage_events.id as a 64-bit integer on PostgreSQL

One event is written per item run, so an int4 id (and its serial's int4 sequence) ran out after
about 2.1 billion items; every record call failed from then on. SQLite's INTEGER PRIMARY KEY is
its 64-bit rowid already. The column's type change rewrites the table under an exclusive lock:
on a large table, run `batchgate migrate` in a quiet moment.

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
    if op.get_bind().dialect.name != "postgresql":
        return
    op.alter_column("usage_events", "id", type_=sa.BigInteger(), existing_type=sa.Integer())
    # The column's sequence keeps its own type (a serial's is int4): it must grow too.
    op.execute(
        "DO $$ BEGIN EXECUTE format('ALTER SEQUENCE %s AS bigint', "
        "pg_get_serial_sequence('usage_events', 'id')); END $$"
    )


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(
        "DO $$ BEGIN EXECUTE format('ALTER SEQUENCE %s AS integer', "
        "pg_get_serial_sequence('usage_events', 'id')); END $$"
    )
    op.alter_column("usage_events", "id", type_=sa.Integer(), existing_type=sa.BigInteger())
