"""A project's share of a provider's request budget, through the real stack (README "Policies
and scopes"): with `--rate-share 0.1` of a 60-requests-per-minute provider a project's items
start at 6 per minute (its bucket starts with a minute's worth), while another project on the
same provider is not held back."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.test_keys_and_budgets import cli, new_key
from tests.execution_support import item_states, private_stack, wait_until, write_catalogue
from tests.support import chat_records, free_port, upload, wait_for_batch

pytestmark = pytest.mark.alone  # it bounds how long things take


def test_a_projects_items_start_no_faster_than_its_share(db_kind: str, tmp_path: Path) -> None:
    simulator_port = free_port()
    config = write_catalogue(tmp_path / "catalogue.yaml", simulator_port, requests_per_minute=60)
    env = {"BATCHGATE_CONFIG": config, "BATCHGATE_SIMULATOR_PORT": str(simulator_port)}
    with private_stack(db_kind, tmp_path, **env) as stack:
        cli(stack, "projects", "create", "capped", "--rate-share", "0.1")
        assert "capped\tno budget\trate-share=0.1" in cli(stack, "projects", "list").stdout
        batches = {}
        for project in ("capped", "free"):
            new_key(stack, project)
            client = stack.client(project)
            batches[project] = client.batches.create(
                input_file_id=upload(client, chat_records(9, prefix=project)).id,
                endpoint="/v1/chat/completions",
                completion_window="24h",
            ).id
        done = wait_for_batch(stack.client("free"), batches["free"], timeout_s=60)
        assert done.request_counts.completed == 9

        capped = batches["capped"]
        wait_until(
            "the first minute's worth", lambda: item_states(stack.database_url, capped)["succeeded"] == 6, 60
        )
        # The next one is allowed 10 s after the bucket ran dry; well before that, nothing more.
        wait_until("the queue settles", lambda: item_states(stack.database_url, capped)["leased"] == 0, 10)
        states = item_states(stack.database_url, capped)
        assert (states["succeeded"], states["queued"]) == (6, 3)
        wait_until("the share refills", lambda: item_states(stack.database_url, capped)["succeeded"] >= 7, 60)
