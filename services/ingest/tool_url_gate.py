"""Where a tool-calling record's tool server is (server-side request forgery guard).

After `RecordChecker` accepted a record that names a tool_config, its tool URL's host must
resolve to addresses the private-address policy allows (`tool_allowed_networks`, by default
`webhook_allowed_networks`), as a webhook URL's must; otherwise the record is rejected
`invalid_tool_config` (a workflow's callback URL likewise, `invalid_workflow`). A create
resolves each distinct host once, and names at most `MAX_HOSTS` of them. The executor checks
again at every call (`services.executor.tools.transport`): DNS may change meanwhile.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from batchgate.services.common.config import Settings
from batchgate.services.common.webhook_urls import RefusedUrl, allowed_addresses, split_url, tool_networks
from batchgate.services.common.workflow_config import INVALID_CODE as INVALID_WORKFLOW_CODE
from batchgate.services.common.workflow_config import WORKFLOW_KEY
from batchgate.services.ingest.tool_records import TOOL_CONFIG_CODE
from batchgate.services.ingest.validation import Accepted, Rejected

MAX_HOSTS = 100
"""Distinct tool servers (host and port) one batch may name: each is resolved at create."""


@dataclass
class ToolUrlGate:
    """Refuses accepted records whose tool URL may not be called (per create)."""

    settings: Settings
    _verdicts: dict[tuple[str, int], str | None] = field(default_factory=dict)
    """(host, port) → why it is refused (None: allowed)."""

    async def _verdict(self, url: str) -> str | None:
        try:
            host = split_url(url)
        except RefusedUrl as exc:
            return str(exc)
        if host not in self._verdicts:
            if len(self._verdicts) >= MAX_HOSTS:
                return f"a batch may name at most {MAX_HOSTS} tool servers (host and port)."
            try:
                await allowed_addresses(url, tool_networks(self.settings))
                self._verdicts[host] = None
            except RefusedUrl as exc:
                self._verdicts[host] = str(exc).replace("webhooks go to", "tool servers must be at")
        return self._verdicts[host]

    async def admit(self, outcome: Accepted | Rejected) -> Accepted | Rejected:
        if not isinstance(outcome, Accepted) or outcome.tool_url is None:
            return outcome
        refused = await self._verdict(outcome.tool_url)
        if refused is None:
            return replace(outcome, tool_url=None)
        code = INVALID_WORKFLOW_CODE if outcome.url_section == WORKFLOW_KEY else TOOL_CONFIG_CODE
        return Rejected(code, f"'{outcome.url_section}.url' may not be called: {refused}", outcome.custom_id)
