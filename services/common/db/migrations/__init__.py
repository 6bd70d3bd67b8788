"""Alembic migrations; apply with `batchgate migrate` (or `services.common.db.migrate`)."""
