"""Executor service: runs leased items against upstream providers (no database connection)."""
