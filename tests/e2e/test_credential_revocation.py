"""Credentials are re-checked while a batch runs (README "Keys, projects and budgets"):
revoking its key, or the key expiring, stops the batch's remaining items within
`auth_cache_s`; they end `credential_revoked`, what finished stays, and the batch ends
`cancelled` with its output and error files."""

from __future__ import annotations

import time
import uuid
from typing import Any

from tests.e2e.test_keys_and_budgets import cli, new_key
from tests.execution_support import item_states, wait_until
from tests.support import RunningStack, chat_records, read_jsonl, upload, wait_for_batch

QUICK = 2
SLOW = 6


def records(prefix: str) -> list[dict[str, Any]]:
    """Two quick records, then six that take a minute each (still running or queued at revoke)."""
    quick = chat_records(QUICK, prefix=f"{prefix}-quick")
    slow = chat_records(SLOW, prefix=f"{prefix}-slow", x_sim={"delay_ms": 60_000})
    return quick + slow


def start_batch(stack: RunningStack, project: str) -> tuple[str, str]:
    """A batch created with a fresh key (returned) whose quick items are done."""
    key_id = new_key(stack, project)
    client = stack.client(project)
    batch = client.batches.create(
        input_file_id=upload(client, records(project)).id,
        endpoint="/v1/chat/completions",
        completion_window="24h",
    )
    wait_until(
        "quick items done", lambda: item_states(stack.database_url, batch.id)["succeeded"] == QUICK, 60
    )
    return key_id, batch.id


def assert_stopped(stack: RunningStack, project: str, batch_id: str, since: float) -> None:
    """Read with another key of the project: the revoked one is refused now."""
    new_key(stack, project)
    client = stack.client(project)
    bound = stack.settings.auth_cache_s + stack.settings.maintenance_interval_s + 10  # a loaded machine
    done = wait_for_batch(client, batch_id, timeout_s=bound)
    assert time.monotonic() - since < bound
    assert done.status == "cancelled" and done.cancelled_at is not None
    assert (done.request_counts.completed, done.request_counts.failed) == (QUICK, SLOW)
    output = read_jsonl(client.files.content(done.output_file_id).content)
    assert sorted(line["custom_id"] for line in output) == [f"{project}-quick-{i}" for i in range(QUICK)]
    errors = read_jsonl(client.files.content(done.error_file_id).content)
    assert len(errors) == SLOW
    assert {line["error"]["code"] for line in errors} == {"credential_revoked"}
    assert set(item_states(stack.database_url, batch_id)) == {"succeeded", "cancelled"}


def test_revoking_a_key_stops_its_running_batch(shared_stack: RunningStack) -> None:
    project = f"revoked-{uuid.uuid4().hex[:6]}"
    key_id, batch_id = start_batch(shared_stack, project)
    revoked_at = time.monotonic()
    cli(shared_stack, "keys", "revoke", key_id, "--no-wait")
    assert_stopped(shared_stack, project, batch_id, revoked_at)


def test_a_key_expiring_stops_its_running_batch(shared_stack: RunningStack) -> None:
    project = f"expiring-{uuid.uuid4().hex[:6]}"
    key_id, batch_id = start_batch(shared_stack, project)
    cli(shared_stack, "keys", "set-policy", key_id, "--expires-in", "1s")
    expired_at = time.monotonic() + 1
    assert_stopped(shared_stack, project, batch_id, expired_at)
