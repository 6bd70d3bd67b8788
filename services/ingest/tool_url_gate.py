"""Where a tool-calling record's tool server is (server-side request forgery guard).

After `RecordChecker` accepted a record that names a tool_config, its tool URL's host must
resolve to addresses the private-address policy allows (`tool_allowed_networks`, by default
`webhook_allowed_networks`), as a webhook URL's must; otherwise the record is rejected
`invalid_tool_config`. A create resolves each distinct URL once. The executor checks again at
every call (`services.executor.tools.transport`): DNS may change meanwhile.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from services.common.config import Settings
from services.common.webhook_urls import RefusedUrl, allowed_addresses
from services.ingest.tool_records import TOOL_CONFIG_CODE
from services.ingest.validation import Accepted, Rejected


@dataclass
class ToolUrlGate:
    """Refuses accepted records whose tool URL may not be called (per create)."""

    settings: Settings
    _verdicts: dict[str, str | None] = field(default_factory=dict)
    """URL → why it is refused (None: allowed)."""

    async def admit(self, outcome: Accepted | Rejected) -> Accepted | Rejected:
        if not isinstance(outcome, Accepted) or outcome.tool_url is None:
            return outcome
        url = outcome.tool_url
        if url not in self._verdicts:
            try:
                await allowed_addresses(url, self.settings.tool_allowed_network_list)
                self._verdicts[url] = None
            except RefusedUrl as exc:
                self._verdicts[url] = str(exc).replace("webhooks go to", "tool servers must be at")
        refused = self._verdicts[url]
        if refused is None:
            return replace(outcome, tool_url=None)
        return Rejected(
            TOOL_CONFIG_CODE, f"'tool_config.url' may not be called: {refused}", outcome.custom_id
        )
