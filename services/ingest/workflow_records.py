"""Create-time checks of a workflow record (`batchgate.workflow`, see
`services.common.workflow_config`): the object itself, and that the record does not also ask
for a tool loop. `RecordChecker` runs it on every record; `services.ingest.tool_url_gate` then
checks where the callback URL resolves to, as it does for tool servers.
"""

from __future__ import annotations

from typing import Any

from batchgate.services.common.config import Settings
from batchgate.services.common.workflow_config import (
    InvalidWorkflow,
    parse_workflow,
    raw_workflow,
    with_workflow,
)


def check_workflow_record(
    body: dict[str, Any], has_tool_config: bool, settings: Settings
) -> tuple[dict[str, Any], str | None]:
    """(the body to store, the callback URL) — the body unchanged and None when it names no
    workflow; raises InvalidWorkflow."""
    named, value = raw_workflow(body)
    if not named:
        return body, None
    if has_tool_config:
        raise InvalidWorkflow("A record cannot carry both 'batchgate.workflow' and 'batchgate.tool_config'.")
    config = parse_workflow(value, settings)
    return with_workflow(body, config), config.url
