"""What a workflow has run so far (steps, requests, upstream calls, summed usage), the results
of a step as the callback reads them, and the record's outcome: the
`batchgate.workflow.result` body when it completed, an error that names the step when it did
not. Either way the usage of every request that succeeded is the outcome's, so it is billed."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import orjson

from batchgate.internal.v1 import recorder_pb2, scheduler_pb2
from batchgate.services.common.token_usage import add_usage, total_tokens, usage_json
from batchgate.services.executor.upstream import fallback_request_id

RESULT_OBJECT = "batchgate.workflow.result"
MAX_MESSAGE_CHARS = 500


@dataclass
class Tally:
    started: float = field(default_factory=time.monotonic)
    steps: int = 0
    """Steps whose requests ran."""
    requests: int = 0
    calls: int = 0
    usage: recorder_pb2.TokenUsage = field(default_factory=recorder_pb2.TokenUsage)
    model: str = ""
    provider: str = ""

    @property
    def tokens(self) -> int:
        return total_tokens(self.usage)

    def add(self, outcome: recorder_pb2.Outcome) -> None:
        """One request's outcome: its calls, and when it succeeded, its usage and model."""
        self.calls += outcome.attempts
        if outcome.state == recorder_pb2.OUTCOME_STATE_SUCCEEDED:
            add_usage(self.usage, outcome.usage)
            self.model, self.provider = outcome.model, outcome.provider


def request_result(request_id: str, outcome: recorder_pb2.Outcome) -> dict[str, Any]:
    """One entry of a step's `results`: the upstream's answer (a success or an HTTP error, as
    an output line has it) or, when no HTTP answer ended the request, an error."""
    if outcome.status_code:
        try:
            body: Any = orjson.loads(outcome.response_body)
        except orjson.JSONDecodeError:
            body = outcome.response_body.decode(errors="replace")
        return {"id": request_id, "status_code": outcome.status_code, "body": body}
    return refused(request_id, outcome.error_code, outcome.error_message)


def refused(request_id: str, code: str, message: str) -> dict[str, Any]:
    """A result entry for a request that failed without an upstream answer (or never ran)."""
    return {"id": request_id, "error": {"code": code, "message": message}}


def _base(item: scheduler_pb2.LeasedItem, tally: Tally) -> recorder_pb2.Outcome:
    outcome = recorder_pb2.Outcome(
        ref=item.ref,
        model=tally.model or item.model,
        provider=tally.provider,
        attempts=tally.calls,
        latency_ms=int((time.monotonic() - tally.started) * 1000),
    )
    outcome.usage.CopyFrom(tally.usage)
    return outcome


def completed(item: scheduler_pb2.LeasedItem, tally: Tally, output: Any) -> recorder_pb2.Outcome:
    """The callback answered `completed`: the record's output line."""
    outcome = _base(item, tally)
    outcome.state = recorder_pb2.OUTCOME_STATE_SUCCEEDED
    outcome.status_code = 200
    outcome.request_id = fallback_request_id()  # the answer is ours, not one upstream's
    outcome.response_body = orjson.dumps(
        {
            "object": RESULT_OBJECT,
            "output": output,
            "steps": tally.steps,
            "requests": tally.requests,
            "usage": usage_json(tally.usage),
        }
    )
    return outcome


def failed(
    item: scheduler_pb2.LeasedItem, tally: Tally, step: int, code: str, why: str
) -> recorder_pb2.Outcome:
    """The record's error line: `code`, and a message that starts with the step it ended at."""
    outcome = _base(item, tally)
    outcome.state = recorder_pb2.OUTCOME_STATE_FAILED
    outcome.error_code = code
    outcome.error_message = f"Workflow step {step}: {why}"[:MAX_MESSAGE_CHARS]
    return outcome
