"""An executor that dies in the middle of a record's tool loop (right after a tool round, at
the crash point `executor.tools.after_round`): the record runs again from its first turn on the
restarted executor, the tool server sees the repeated round with the same Idempotency-Key, and
the record ends up in the output exactly once, with the rounds and usage of one run."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from tests.execution_support import (
    crash_then_restart_executor,
    create_batch,
    finished_exactly_once,
    item_rows,
    private_stack,
)
from tests.tool_servers import HttpToolServer

TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]


def test_a_crash_mid_loop_completes_the_record_once(db_kind: str, tmp_path: Path) -> None:
    with HttpToolServer() as tools:
        records = [
            {
                "custom_id": f"crash-{i}",
                "method": "POST",
                "url": "/v1/chat/completions",
                "body": {
                    "model": "gpt-4o-mini",
                    "messages": [{"role": "user", "content": f"crash {i}"}],
                    "tools": TOOLS,
                    "x_sim": {"tool_rounds": 2, "usage": {"prompt_tokens": 10, "completion_tokens": 3}},
                    "batchgate": {"tool_config": {"url": tools.url}},
                },
            }
            for i in range(3)
        ]
        env = {"BATCHGATE_EXECUTORS": "0", "BATCHGATE_CRASH_AT": "executor.tools.after_round"}
        with private_stack(db_kind, tmp_path, **env) as stack:
            batch = create_batch(stack, records)
            crash_then_restart_executor(stack)
            done, output, errors = finished_exactly_once(stack, batch.id, records, timeout_s=120)
            assert (done.status, done.request_counts.completed, errors) == ("completed", 3, [])
            for line in output:
                body = line["response"]["body"]
                assert body["batchgate"] == {"tool_rounds": 2} and body["usage"]["prompt_tokens"] == 30
            assert done.usage.input_tokens == 90  # each record billed for one run
            assert max(row.attempt for row in item_rows(stack.database_url, batch.id)) >= 2
        rounds = Counter((r.body["custom_id"], r.headers["idempotency-key"]) for r in tools.requests())
        # The crash came right after a first round: that round ran twice under one key.
        assert 2 in rounds.values()
        assert len({key for _cid, key in rounds}) == 6  # 3 records × 2 rounds, nothing else
