"""An executor that dies in the middle of a workflow (right after the callback answered step 0,
at the crash point `executor.workflows.after_step`): the record runs again from step 0 on the
restarted executor, the callback sees the repeated step with the same Idempotency-Key, and the
record ends up in the output exactly once, with the steps, requests and usage of one run."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from tests.e2e.test_keys_and_budgets import cli
from tests.execution_support import (
    crash_then_restart_executor,
    create_batch,
    finished_exactly_once,
    item_rows,
    private_stack,
)
from tests.workflow_servers import WorkflowCallbackServer

USAGE = {"prompt_tokens": 10, "completion_tokens": 3}


def test_a_crash_mid_workflow_completes_the_record_once(db_kind: str, tmp_path: Path) -> None:
    with WorkflowCallbackServer() as callback:
        records = [
            {
                "custom_id": f"crash-{i}",
                "method": "POST",
                "url": "/v1/chat/completions",
                "body": {
                    "model": "gpt-4o-mini",
                    "messages": [{"role": "user", "content": f"document {i}"}],
                    "x_sim": {"usage": USAGE},
                    "batchgate": {"workflow": {"url": callback.url, "context": {"x_sim": {"usage": USAGE}}}},
                },
            }
            for i in range(3)
        ]
        env = {"BATCHGATE_EXECUTORS": "0", "BATCHGATE_CRASH_AT": "executor.workflows.after_step"}
        with private_stack(db_kind, tmp_path, **env) as stack:
            cli(stack, "projects", "set-policy", "default", "--features", "workflows")
            batch = create_batch(stack, records)
            crash_then_restart_executor(stack)
            done, output, errors = finished_exactly_once(stack, batch.id, records, timeout_s=120)
            assert (done.status, done.request_counts.completed, errors) == ("completed", 3, [])
            for line in output:
                body = line["response"]["body"]
                assert (body["steps"], body["requests"], body["usage"]["prompt_tokens"]) == (3, 5, 50)
            assert done.usage.input_tokens == 150  # each record billed for one run
            assert max(row.attempt for row in item_rows(stack.database_url, batch.id)) >= 2
        steps = Counter(
            (r.body["custom_id"], r.body["step"], r.headers["idempotency-key"]) for r in callback.requests()
        )
        # The crash came right after a step 0: that step was posted twice under one key.
        assert 2 in steps.values()
        assert len({key for _cid, _step, key in steps}) == 9  # 3 records × 3 steps, nothing else
