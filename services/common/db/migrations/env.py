"""Alembic environment: runs on the connection `batchgate.services.common.db.migrate` hands over."""

from __future__ import annotations

from alembic import context

from batchgate.services.common.db.schema import metadata

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=metadata,
    render_as_batch=connection.dialect.name == "sqlite",  # SQLite alters tables by copying them
)
with context.begin_transaction():
    context.run_migrations()
