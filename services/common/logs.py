"""Process-wide logging: JSON lines when stderr is not a terminal, readable text when it is.

A record logged inside a traced span carries that span's `trace_id` and `span_id`, so a log
line leads to its trace (and a trace UI can search logs by trace id); `batch_id`,
`custom_id`, `item_index` and `executor_id` passed in `extra=` become fields of their own.
Secrets never reach a log call on purpose; as a second line of defence, anything shaped like
a batchgate API key, a bearer token or a configured upstream key is masked in every line.
"""

from __future__ import annotations

import logging
import re
import sys
import time
from collections.abc import Iterable
from typing import Any

import orjson
from opentelemetry import trace

CONTEXT_FIELDS = ("batch_id", "custom_id", "item_index", "executor_id")
MASK = "[REDACTED]"
MIN_SECRET_CHARS = 8  # shorter "keys" (test placeholders) would mask ordinary words
_SHAPED_SECRETS = re.compile(
    r"bg-[A-Za-z0-9_-]{16,}"  # batchgate API keys (batchgate.services.common.auth)
    r"|(?<=[Bb]earer )[^\s'\",]+"  # Authorization: Bearer …
    r"|(?<=x-api-key': ')[^']+|(?<=x-api-key\": \")[^\"]+"  # headers printed as a dict
)
NOISY_LOGGERS = ("aiohttp.access", "sqlalchemy.engine", "alembic.runtime.migration")


class Redactor:
    """Masks secrets in rendered log lines."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._literal = sorted({s for s in secrets if len(s) >= MIN_SECRET_CHARS}, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        text = _SHAPED_SECRETS.sub(MASK, text)
        for secret in self._literal:
            if secret in text:
                text = text.replace(secret, MASK)
        return text


def _trace_ids() -> tuple[str, str] | None:
    """The current span's ids when it is being exported (an unsampled span has no trace to find)."""
    ctx = trace.get_current_span().get_span_context()
    if not ctx.is_valid or not ctx.trace_flags.sampled:
        return None
    return f"{ctx.trace_id:032x}", f"{ctx.span_id:016x}"


class JsonFormatter(logging.Formatter):
    def __init__(self, service: str, redact: Redactor) -> None:
        super().__init__()
        self._service = service
        self._redact = redact

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "service": self._service,
            "logger": record.name,
            "message": record.getMessage(),
        }
        ids = _trace_ids()
        if ids is not None:
            entry["trace_id"], entry["span_id"] = ids
        for name in CONTEXT_FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                entry[name] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return self._redact(orjson.dumps(entry, default=str).decode())


class TextFormatter(logging.Formatter):
    def __init__(self, service: str, redact: Redactor) -> None:
        super().__init__(f"%(asctime)s %(levelname)s [{service}] %(name)s: %(message)s")
        self._redact = redact

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        fields = [f"{n}={getattr(record, n)}" for n in CONTEXT_FIELDS if getattr(record, n, None) is not None]
        ids = _trace_ids()
        if ids is not None:
            fields.append(f"trace_id={ids[0]}")
        return self._redact(f"{text} [{' '.join(fields)}]" if fields else text)


def json_lines(fmt: str) -> bool:
    """Whether a process logging to this process's stderr writes JSON lines in format `fmt`
    (`json`, `text`, or `auto`: JSON unless stderr is a terminal). Envoy's are decided here too."""
    return fmt == "json" or (fmt == "auto" and not sys.stderr.isatty())


def setup(service: str, level: str = "INFO", fmt: str = "auto", secrets: Iterable[str] = ()) -> None:
    """Log to stderr as `fmt` (json, text, or auto: JSON unless stderr is a terminal), masking
    `secrets` (upstream keys) besides anything shaped like a key."""
    redact = Redactor(secrets)
    use_json = json_lines(fmt)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter(service, redact) if use_json else TextFormatter(service, redact))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for noisy in NOISY_LOGGERS:
        logging.getLogger(noisy).setLevel(logging.WARNING)
