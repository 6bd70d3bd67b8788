"""Alembic migrations; apply with `batchgate migrate` (or `batchgate.services.common.db.migrate`)."""
