"""Workflows: records whose requests depend on earlier answers, driven by the user's callback
(`batchgate.workflow`)."""
