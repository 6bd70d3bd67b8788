"""`batchgate.tool_config`: the reserved extension object of a tool-calling chat record.

A `/v1/chat/completions` record that carries `{"batchgate": {"tool_config": {…}}}` in its body
has its tool calls run by the executor between model turns (`services/executor/tools`). Ingest
checks the object at create (`parse_tool_config`, rejection `invalid_tool_config`) and stores it
normalised (defaults filled in, values over a cap clamped), so the executor reads the same
values; the executor parses it again (its own limits may be lower) and strips it
(`strip_tool_config`) before every model call. Records without it are untouched.

Fields: `type` (`http` default, or `mcp`), `url`, `authorization` (the `Authorization` header
of every tool request), `context` (any JSON), `max_rounds` (default 8, at most 16),
`max_tokens` (prompt + completion over every model turn of the record, as a workflow's: default
and cap are the settings `workflow_max_tokens` and `workflow_max_tokens_cap`; the record's
budget hold, and no turn starts that could pass it), `timeout_ms` (default 30,000, at most the
request time limit). Omitted or 0 → the default; above a cap → the cap; negative, a wrong type
(`false` included), a bad URL or one holding credentials, or an `authorization` with a control
character → refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from batchgate.services.common.config import Settings
from batchgate.services.common.webhook_urls import RefusedUrl, split_url

EXTENSION_KEY = "batchgate"
CONFIG_KEY = "tool_config"
TOOL_TYPES = ("http", "mcp")
DEFAULT_TYPE = "http"
DEFAULT_MAX_ROUNDS = 8
MAX_ROUNDS_CAP = 16
DEFAULT_TIMEOUT_MS = 30_000
MAX_AUTHORIZATION_CHARS = 8192
_HEADER_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
"""What a header value must not hold (a tab may): aiohttp refuses to send it, at run time."""
FIELDS = frozenset({"type", "url", "authorization", "context", "max_rounds", "max_tokens", "timeout_ms"})


class InvalidToolConfig(ValueError):
    """The record's tool_config cannot be used; the message says what to fix."""


@dataclass(frozen=True, kw_only=True)
class ToolConfig:
    type: str
    url: str
    authorization: str | None = field(default=None, repr=False)
    """Sent as the `Authorization` header of every tool request; never logged or traced."""
    context: Any = None
    max_rounds: int = DEFAULT_MAX_ROUNDS
    max_tokens: int
    timeout_ms: int = DEFAULT_TIMEOUT_MS

    def as_json(self) -> dict[str, Any]:
        """The normalised object, as ingest stores it in the record's body."""
        stored: dict[str, Any] = {
            "type": self.type,
            "url": self.url,
            "max_rounds": self.max_rounds,
            "max_tokens": self.max_tokens,
            "timeout_ms": self.timeout_ms,
        }
        return with_optional_fields(stored, self.authorization, self.context)


def with_optional_fields(stored: dict[str, Any], authorization: str | None, context: Any) -> dict[str, Any]:
    """`stored` (an extension object's normalised fields) with `authorization` and `context`
    when they are set."""
    if authorization is not None:
        stored["authorization"] = authorization
    if context is not None:
        stored["context"] = context
    return stored


def raw_tool_config(body: dict[str, Any], key: str = CONFIG_KEY) -> tuple[bool, Any]:
    """(whether the body names a tool_config, its value); `key` names another object of the
    `batchgate` extension (a workflow)."""
    extension = body.get(EXTENSION_KEY)
    if not isinstance(extension, dict) or key not in extension:
        return False, None
    return True, extension[key]


def bounded_int(
    config: dict[str, Any],
    name: str,
    default: int,
    cap: int,
    *,
    section: str = CONFIG_KEY,
    error: type[ValueError] = InvalidToolConfig,
) -> int:
    """Field `name` of the extension object `section`: omitted or 0 → `default`, above `cap` →
    `cap`; a negative or non-integer value raises `error`. A whole number written as JSON
    reads it (`1e20`, `30000.0`) is one: it was refused as "not an integer"."""
    value = config.get(name)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int | None):  # `false` is 0 to Python
        raise error(f"'{section}.{name}' must be an integer.")
    if not value:
        return default
    if value < 0:
        raise error(f"'{section}.{name}' must not be negative.")
    return min(value, cap)


def optional_string(
    config: dict[str, Any],
    name: str,
    limit: int,
    *,
    section: str = CONFIG_KEY,
    error: type[ValueError] = InvalidToolConfig,
) -> str | None:
    value = config.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise error(f"'{section}.{name}' must be a non-empty string.")
    if len(value) > limit:
        raise error(f"'{section}.{name}' is longer than {limit} characters.")
    return value


def checked_authorization(
    config: dict[str, Any], *, section: str = CONFIG_KEY, error: type[ValueError] = InvalidToolConfig
) -> str | None:
    """The `authorization` header value of an extension object, if any: one header line."""
    authorization = optional_string(
        config, "authorization", MAX_AUTHORIZATION_CHARS, section=section, error=error
    )
    if authorization is not None and _HEADER_CONTROL.search(authorization):
        raise error(f"'{section}.authorization' must not contain control characters (such as a line break).")
    return authorization


def checked_url(
    config: dict[str, Any], *, section: str = CONFIG_KEY, error: type[ValueError] = InvalidToolConfig
) -> str:
    """The `url` of an extension object: a non-empty http(s) URL `split_url` accepts."""
    url = config.get("url")
    if not isinstance(url, str) or not url:
        raise error(f"'{section}.url' must be a non-empty string.")
    try:
        split_url(url)
    except RefusedUrl as exc:
        raise error(f"'{section}.url' is not usable: {exc}") from None
    if urlsplit(url).username is not None:
        raise error(f"'{section}.url' must not hold credentials (user@): send them as 'authorization'.")
    return url


def parse_tool_config(value: Any, settings: Settings) -> ToolConfig:
    """The tool_config `value` normalised; raises InvalidToolConfig."""
    if not isinstance(value, dict):
        raise InvalidToolConfig("'batchgate.tool_config' must be an object.")
    unknown = sorted(set(value) - FIELDS)
    if unknown:
        raise InvalidToolConfig(f"'tool_config' has unknown field(s) {', '.join(unknown)}.")
    timeout_cap_ms = int(settings.request_timeout_s * 1000)
    kind = DEFAULT_TYPE if value.get("type") is None else value["type"]
    if not isinstance(kind, str) or kind not in TOOL_TYPES:
        raise InvalidToolConfig(f"'tool_config.type' must be one of {', '.join(TOOL_TYPES)}.")
    return ToolConfig(
        type=kind,
        url=checked_url(value),
        authorization=checked_authorization(value),
        context=value.get("context"),
        max_rounds=bounded_int(value, "max_rounds", DEFAULT_MAX_ROUNDS, MAX_ROUNDS_CAP),
        max_tokens=bounded_int(
            value, "max_tokens", settings.workflow_max_tokens, settings.workflow_max_tokens_cap
        ),
        timeout_ms=bounded_int(value, "timeout_ms", min(DEFAULT_TIMEOUT_MS, timeout_cap_ms), timeout_cap_ms),
    )


def with_tool_config(body: dict[str, Any], config: ToolConfig) -> dict[str, Any]:
    """`body` with its tool_config replaced by the normalised `config`."""
    extension = {**body[EXTENSION_KEY], CONFIG_KEY: config.as_json()}
    return {**body, EXTENSION_KEY: extension}


def strip_tool_config(body: dict[str, Any], key: str = CONFIG_KEY) -> dict[str, Any]:
    """`body` as the model sees it: without `batchgate.tool_config` (or `batchgate.{key}`), and
    without the whole `batchgate` object when that was all it held."""
    extension = body.get(EXTENSION_KEY)
    if not isinstance(extension, dict) or key not in extension:
        return body
    rest = {k: v for k, v in extension.items() if k != key}
    stripped = {k: v for k, v in body.items() if k != EXTENSION_KEY}
    if rest:
        stripped[EXTENSION_KEY] = rest
    return stripped
