"""Per-record validation of batch input lines: each record is accepted or rejected alone.

`RecordChecker.check(raw)` is pure apart from the state a batch needs across records
(custom_ids seen, the batch's model) and never raises, whatever the bytes. Codes are stable,
machine-readable strings; messages say what to fix and are cut to `MAX_MESSAGE_BYTES`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import orjson

from batchgate.services.common.catalogue import ModelConfig
from batchgate.services.common.config import Settings
from batchgate.services.common.errors import clip
from batchgate.services.common.jsonl import exact
from batchgate.services.common.seen_ids import SeenIds
from batchgate.services.common.tool_config import CONFIG_KEY, InvalidToolConfig
from batchgate.services.common.workflow_config import INVALID_CODE as INVALID_WORKFLOW_CODE
from batchgate.services.common.workflow_config import WORKFLOW_KEY, InvalidWorkflow
from batchgate.services.ingest.grpc_records import non_json_number
from batchgate.services.ingest.tool_records import TOOL_CONFIG_CODE, check_tool_record
from batchgate.services.ingest.workflow_records import check_workflow_record

MAX_MESSAGE_BYTES = 512
MODEL_MISMATCH = "model_mismatch"
"""A record naming another model than the batch's (a native batch refuses it whole)."""
MAX_BODY_DEPTH = 254
"""Arrays and objects nested in a record's body, at most: what orjson writes back (it reads
1024 levels but writes 254)."""
BODY_DEPTH_RULE = f"A body may nest at most {MAX_BODY_DEPTH} levels of arrays and objects."
_ORJSON_TOO_DEEP = ("Recursion limit reached", "depth limit exceeded")
# The Anthropic Message Batches shape: 1–64 letters, digits, `_` or `-`.
ANTHROPIC_CUSTOM_ID = re.compile(r"[a-zA-Z0-9_-]{1,64}")


@dataclass(frozen=True)
class Accepted:
    custom_id: str
    body: bytes
    model: str
    tool_url: str | None = None
    """The tool server of a tool-calling record (or a workflow's callback), until
    `ToolUrlGate` has checked it."""
    url_section: str = "tool_config"
    """Whose URL `tool_url` is: `tool_config` or `workflow` (it names the rejection)."""
    request: dict[str, Any] = field(kw_only=True, compare=False, repr=False)
    """What `body` encodes, as the check parsed it (never changed in place): holds, estimates
    and guardrails read it instead of parsing every body again (a tenth of a large create)."""


@dataclass(frozen=True)
class Rejected:
    code: str
    message: str
    custom_id: str | None


@dataclass
class RecordChecker:
    """Checks the records of one batch against its endpoint, the offered models and the
    caller's allowed ones.

    `custom_id_pattern`, when given, is a format every custom_id must match in full (API
    shapes that need one, e.g. `ANTHROPIC_CUSTOM_ID`).
    """

    settings: Settings
    endpoint: str
    custom_id_pattern: re.Pattern[str] | None = None
    allowed_models: frozenset[str] | None = None
    """The models the caller's policy allows (None: every offered one)."""
    seen_custom_ids: SeenIds = field(default_factory=SeenIds)
    """Every custom_id that passed its own checks, packed (a set of a million took ~90 MiB):
    claimed even when the rest of its record is rejected, since custom_ids must be unique in
    the batch and the results carry one line per record, rejected ones included."""
    model: str | None = None
    _offered: dict[str, ModelConfig | None] = field(default_factory=dict)
    """Catalogue lookups so far (a batch names one model, tens of thousands of times)."""

    def _reject(self, code: str, message: str, custom_id: str | None = None) -> Rejected:
        return Rejected(code, clip(message, MAX_MESSAGE_BYTES), custom_id)

    def check(self, raw: bytes) -> Accepted | Rejected:
        try:
            record = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            if too_deep(exc):
                return self._reject(
                    "invalid_record", f"The record is nested more than 1024 levels deep. {BODY_DEPTH_RULE}"
                )
            number = non_json_number(raw)
            return self._reject(
                "invalid_json_line", number.message() if number else f"The line is not valid JSON: {exc}."
            )
        if not isinstance(record, dict):
            return self._reject("invalid_record", "Each line must be a JSON object.")
        return self._check_record(record)

    def _check_record(self, record: dict[str, Any]) -> Accepted | Rejected:
        custom_id = record.get("custom_id")
        if custom_id is None:
            return self._reject("missing_custom_id", "The record has no 'custom_id'.")
        if custom_id == "":
            return self._reject("missing_custom_id", "'custom_id' is empty; give each record a unique one.")
        if not isinstance(custom_id, str):
            return self._reject("invalid_custom_id", "'custom_id' must be a string.")
        if len(custom_id) > self.settings.max_custom_id_length:
            return self._reject(  # not echoed: it does not fit where custom_ids are stored
                "invalid_custom_id",
                f"'custom_id' is {len(custom_id)} characters long; "
                f"the limit is {self.settings.max_custom_id_length}.",
            )
        if "\x00" in custom_id:
            return self._reject("invalid_custom_id", "'custom_id' must not contain NUL characters.")
        if self.custom_id_pattern is not None and not self.custom_id_pattern.fullmatch(custom_id):
            return self._reject(
                "invalid_custom_id",
                f"'custom_id' {custom_id!r} must match {self.custom_id_pattern.pattern}.",
                custom_id,
            )
        if custom_id in self.seen_custom_ids:
            return self._reject(
                "duplicate_custom_id",
                f"'custom_id' {custom_id!r} appears more than once in this batch.",
                custom_id,
            )
        self.seen_custom_ids.add(custom_id)
        rejected = self._check_request(record, custom_id)
        if isinstance(rejected, Rejected):
            return rejected
        body, request, model, (section, url) = rejected
        if self.model is None:
            self.model = model
        return Accepted(custom_id, body, model, url, section, request=request)

    def _check_request(
        self, record: dict[str, Any], custom_id: str
    ) -> Rejected | tuple[bytes, dict[str, Any], str, tuple[str, str | None]]:
        method = record.get("method")
        if method != "POST":
            got = "missing" if method is None else f"{method!r}"
            return self._reject("invalid_method", f"'method' must be POST; it is {got}.", custom_id)
        url = record.get("url")
        if url is None:
            return self._reject(
                "url_mismatch",
                f"'url' is missing; it must be the batch endpoint {self.endpoint!r}.",
                custom_id,
            )
        if url != self.endpoint:
            return self._reject(
                "url_mismatch",
                f"'url' {url!r} does not match the batch endpoint {self.endpoint!r}.",
                custom_id,
            )
        body = record.get("body")
        if not isinstance(body, dict):
            return self._reject("invalid_body", "'body' must be a JSON object.", custom_id)
        model = body.get("model")
        if not isinstance(model, str) or not model:
            return self._reject("missing_model", "'body.model' must be a non-empty string.", custom_id)
        refused = self._check_model(model, custom_id)
        if refused is not None:
            return refused
        try:
            checked = self._check_options(body, custom_id)
            if isinstance(checked, Rejected):
                return checked
            body, url_owner = checked
            encoded = orjson.dumps(body)
        except orjson.JSONEncodeError as exc:  # read (1024 levels), but too deep to store
            if not too_deep(exc):
                raise
            return self._reject(
                "invalid_record", f"'body' is nested too deeply. {BODY_DEPTH_RULE}", custom_id
            )
        if len(encoded) > self.settings.max_record_bytes:
            return self._reject(
                "record_too_large",
                f"The request body is {len(encoded)} bytes; the limit is {self.settings.max_record_bytes}.",
                custom_id,
            )
        return exact(encoded), body, model, url_owner

    def _check_options(
        self, body: dict[str, Any], custom_id: str
    ) -> Rejected | tuple[dict[str, Any], tuple[str, str | None]]:
        """What batches do not run (streaming), and a tool_config or a workflow: (the body to
        store, (whose URL, the URL to check))."""
        if body.get("stream") is True:
            return self._reject(
                "stream_not_supported", "'body.stream' must not be true in a batch.", custom_id
            )
        try:
            body, tool_url = check_tool_record(body, self.endpoint, self.settings)
        except InvalidToolConfig as exc:
            return self._reject(TOOL_CONFIG_CODE, str(exc), custom_id)
        try:
            body, callback_url = check_workflow_record(body, tool_url is not None, self.settings)
        except InvalidWorkflow as exc:
            return self._reject(INVALID_WORKFLOW_CODE, str(exc), custom_id)
        if callback_url is not None:
            return body, (WORKFLOW_KEY, callback_url)
        return body, (CONFIG_KEY, tool_url)

    def _check_model(self, model: str, custom_id: str) -> Rejected | None:
        """The record's model is offered for this endpoint, allowed to the caller, and the
        batch's model."""
        if model not in self._offered:
            self._offered[model] = self.settings.model(model)
        offered = self._offered[model]
        if offered is None:
            return self._reject(
                "model_not_found", f"The model {model!r} is not offered by this gateway.", custom_id
            )
        if self.endpoint not in offered.served_endpoints:
            return self._reject(
                "model_not_found", f"The model {model!r} does not serve {self.endpoint}.", custom_id
            )
        if self.allowed_models is not None and model not in self.allowed_models:
            return self._reject(
                "model_not_allowed",
                f"The model {model!r} is not allowed for this API key or project.",
                custom_id,
            )
        if self.model is not None and model != self.model:
            return self._reject(
                MODEL_MISMATCH,
                f"Every record of a batch must use the same model: expected {self.model!r}, got {model!r}.",
                custom_id,
            )
        return None


def too_deep(exc: Exception) -> bool:
    """`exc` is orjson's refusal of JSON nested too deeply (reading past 1024 levels, or writing
    past `MAX_BODY_DEPTH`; its `JSONEncodeError` is a plain TypeError)."""
    return str(exc).startswith(_ORJSON_TOO_DEEP)
