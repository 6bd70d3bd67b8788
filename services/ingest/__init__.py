"""Ingest service: the public Files and Batches APIs (uploads, validation, batch creation)."""
