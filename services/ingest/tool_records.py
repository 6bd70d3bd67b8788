"""Create-time checks of a tool-calling record's request (`batchgate.tool_config`, see
`services.common.tool_config`): the object itself, and what the tool loop needs of the request
around it (the chat endpoint, `tools`, one choice). `RecordChecker` runs it on every record;
`services.ingest.tool_url_gate` then checks where the tool URL resolves to.
"""

from __future__ import annotations

from typing import Any

from batchgate.services.common.config import Settings
from batchgate.services.common.tool_config import (
    InvalidToolConfig,
    parse_tool_config,
    raw_tool_config,
    with_tool_config,
)

TOOL_CONFIG_CODE = "invalid_tool_config"
TOOL_ENDPOINT = "/v1/chat/completions"


def check_tool_record(
    body: dict[str, Any], endpoint: str, settings: Settings
) -> tuple[dict[str, Any], str | None]:
    """(the body to store, the tool URL) — the body unchanged and None when it names no
    tool_config; raises InvalidToolConfig."""
    named, value = raw_tool_config(body)
    if not named:
        return body, None
    if endpoint != TOOL_ENDPOINT:
        raise InvalidToolConfig(f"'batchgate.tool_config' is for {TOOL_ENDPOINT} batches only.")
    config = parse_tool_config(value, settings)
    tools = body.get("tools")
    if not isinstance(tools, list) or not tools:
        raise InvalidToolConfig("'batchgate.tool_config' needs a non-empty 'body.tools'.")
    if body.get("n") not in (None, 1):
        raise InvalidToolConfig("'body.n' must be 1 with 'batchgate.tool_config'.")
    return with_tool_config(body, config), config.url
