"""`batchgate.workflow`: the reserved extension object of a record whose requests depend on
earlier answers, driven by the user's callback (`services/executor/workflows`).

Ingest checks it at create (`parse_workflow`, rejection `invalid_workflow`) and stores it
normalised (defaults filled in, values over a cap lowered to the cap), so the executor reads the
values ingest accepted; the executor parses it again and strips it (`strip_workflow`) from the
record's own body, which is step 0's single request.

Fields: `url` (the callback), `authorization` (its `Authorization` header), `context` (any
JSON, sent back at every step), `max_steps` (default 8, at most 32), `max_requests` (default
64, at most 1,024, over the whole record, step 0 included), `max_tokens` (prompt + completion
over the whole record; default and cap are the settings `workflow_max_tokens` and
`workflow_max_tokens_cap`), `timeout_ms` (per callback call; default 30,000, at most the
request time limit). Omitted or 0 → the default; negative, a wrong type or a bad URL → refused.
The field helpers are the tool_config's (`services.common.tool_config`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from batchgate.services.common.config import Settings
from batchgate.services.common.tool_config import (
    DEFAULT_TIMEOUT_MS,
    EXTENSION_KEY,
    bounded_int,
    checked_authorization,
    checked_url,
    raw_tool_config,
    strip_tool_config,
    with_optional_fields,
)

WORKFLOW_KEY = "workflow"
INVALID_CODE = "invalid_workflow"
DEFAULT_MAX_STEPS = 8
MAX_STEPS_CAP = 32
DEFAULT_MAX_REQUESTS = 64
MAX_REQUESTS_CAP = 1024
FIELDS = frozenset(
    {"url", "authorization", "context", "max_steps", "max_requests", "max_tokens", "timeout_ms"}
)
MARKER = b'"workflow"'


class InvalidWorkflow(ValueError):
    """The record's workflow cannot be used; the message says what to fix."""


@dataclass(frozen=True, kw_only=True)
class WorkflowConfig:
    url: str
    authorization: str | None = field(default=None, repr=False)
    """Sent as the `Authorization` header of every callback call; never logged or traced."""
    context: Any = None
    max_steps: int = DEFAULT_MAX_STEPS
    max_requests: int = DEFAULT_MAX_REQUESTS
    max_tokens: int
    timeout_ms: int = DEFAULT_TIMEOUT_MS

    def as_json(self) -> dict[str, Any]:
        """The normalised object, as ingest stores it in the record's body."""
        stored: dict[str, Any] = {
            "url": self.url,
            "max_steps": self.max_steps,
            "max_requests": self.max_requests,
            "max_tokens": self.max_tokens,
            "timeout_ms": self.timeout_ms,
        }
        return with_optional_fields(stored, self.authorization, self.context)


def names_workflow(body: bytes) -> bool:
    """Whether a stored body may carry a workflow (a byte search: most records don't)."""
    return MARKER in body


def raw_workflow(body: dict[str, Any]) -> tuple[bool, Any]:
    """(whether the body names a workflow, its value)."""
    return raw_tool_config(body, WORKFLOW_KEY)


def parse_workflow(value: Any, settings: Settings) -> WorkflowConfig:
    """The workflow `value` normalised; raises InvalidWorkflow."""
    if not isinstance(value, dict):
        raise InvalidWorkflow("'batchgate.workflow' must be an object.")
    unknown = sorted(set(value) - FIELDS)
    if unknown:
        raise InvalidWorkflow(f"'workflow' has unknown field(s) {', '.join(unknown)}.")
    timeout_cap_ms = int(settings.request_timeout_s * 1000)
    where: dict[str, Any] = {"section": WORKFLOW_KEY, "error": InvalidWorkflow}
    return WorkflowConfig(
        url=checked_url(value, **where),
        authorization=checked_authorization(value, **where),
        context=value.get("context"),
        max_steps=bounded_int(value, "max_steps", DEFAULT_MAX_STEPS, MAX_STEPS_CAP, **where),
        max_requests=bounded_int(value, "max_requests", DEFAULT_MAX_REQUESTS, MAX_REQUESTS_CAP, **where),
        max_tokens=bounded_int(
            value,
            "max_tokens",
            settings.workflow_max_tokens,
            settings.workflow_max_tokens_cap,
            **where,
        ),
        timeout_ms=bounded_int(
            value, "timeout_ms", min(DEFAULT_TIMEOUT_MS, timeout_cap_ms), timeout_cap_ms, **where
        ),
    )


def with_workflow(body: dict[str, Any], config: WorkflowConfig) -> dict[str, Any]:
    """`body` with its workflow replaced by the normalised `config`."""
    extension = {**body[EXTENSION_KEY], WORKFLOW_KEY: config.as_json()}
    return {**body, EXTENSION_KEY: extension}


def strip_workflow(body: dict[str, Any]) -> dict[str, Any]:
    """Step 0's request: `body` without `batchgate.workflow`."""
    return strip_tool_config(body, WORKFLOW_KEY)
