"""Scheduler service: the durable work queue (leases, priorities, fairness, cancel, expiry, rescue)."""
