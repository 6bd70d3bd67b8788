"""Loading the settings: defaults ← YAML file ← environment ← explicit overrides, parsed and
checked once here, so that a bad value is a startup error and nothing re-parses it later.

The YAML file (`--config FILE` or `BATCHGATE_CONFIG`) uses the settings' field names as keys,
plus the catalogue's `retry:`, `providers:` and `models:` (`batchgate.services.common.catalogue`);
environment variables are each field's `env` (`batchgate.services.common.config`). Without providers,
every model is served by the built-in simulator.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

from batchgate.services.common.catalogue import (
    CATALOGUE_KEYS,
    check_catalogue,
    parse_catalogue,
    simulated_catalogue,
)
from batchgate.services.common.config import LOG_FORMATS, Settings
from batchgate.services.common.webhook_urls import tool_networks, webhook_networks
from batchgate.services.common.windows import parse_window

MAX_CUSTOM_ID_COLUMN = 512  # items.custom_id
MAX_SHUTDOWN_GRACE_S = 10.0  # an executor's drain must end within the launcher's 20 s stop limit

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off", "")


def env_fields() -> list[dataclasses.Field[Any]]:
    """Settings that an environment variable can set (the README table lists these)."""
    return [f for f in dataclasses.fields(Settings) if "env" in f.metadata]


def _bool(raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text not in _TRUE + _FALSE:
        raise ValueError(f"expected true or false, not {raw!r}")
    return text in _TRUE


def _cast(raw: Any, type_name: str) -> Any:
    """Settings' annotations are strings (postponed evaluation): int, float, bool or str."""
    casts: dict[str, Callable[[Any], Any]] = {"int": int, "float": float, "bool": _bool}
    return casts.get(type_name, str)(raw)


def _from_file(path: str, environ: Mapping[str, str]) -> dict[str, Any]:
    doc = yaml.safe_load(Path(path).read_text()) or {}
    if not isinstance(doc, dict):
        raise ValueError(f"{path}: expected a mapping at the top level")
    scalar_names = {f.name for f in env_fields()}
    unknown = set(doc) - scalar_names - set(CATALOGUE_KEYS)
    if unknown:
        raise ValueError(f"{path}: unknown settings {sorted(unknown)}")
    return {**{k: v for k, v in doc.items() if k in scalar_names}, **parse_catalogue(doc, environ)}


def load_settings(
    config_file: str | None = None, environ: Mapping[str, str] | None = None, **overrides: Any
) -> Settings:
    """Defaults ← YAML file ← environment ← explicit overrides; ValueError when a value is bad."""
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    path = config_file or environ.get("BATCHGATE_CONFIG")
    if path:
        values.update(_from_file(path, environ))
    for f in env_fields():
        if f.metadata["env"] in environ:
            values[f.name] = environ[f.metadata["env"]]
    values.update(overrides)
    for f in env_fields():
        if f.name in values:
            values[f.name] = _cast(values[f.name], str(f.type))
    settings = Settings(**values)
    if not settings.providers:
        providers, models = simulated_catalogue(settings.simulator_host, settings.simulator_port)
        settings = dataclasses.replace(settings, providers=providers, models=settings.models or models)
    _check_limits(settings)
    served = check_catalogue(retry=settings.retry, providers=settings.providers, models=settings.models)
    _check_values(settings)
    return dataclasses.replace(settings, models=served)


def _check_limits(settings: Settings) -> None:
    if not 1 <= settings.max_custom_id_length <= MAX_CUSTOM_ID_COLUMN:
        raise ValueError(f"max_custom_id_length must be between 1 and {MAX_CUSTOM_ID_COLUMN}")
    windows = [("completion_windows", w) for w in settings.completion_window_list]
    for name, window in [*windows, ("message_batch_window", settings.message_batch_window)]:
        try:
            parse_window(window)
        except ValueError:
            raise ValueError(
                f"{name}: {window!r} is not <number><unit> with a unit of s, m, h or d"
            ) from None


def _check_values(settings: Settings) -> None:
    for name in ("batch_discount_standard", "batch_discount_expedited"):
        if not 0.0 <= getattr(settings, name) <= 1.0:
            raise ValueError(f"{name} must be between 0 and 1")
    if not 0.0 <= settings.trace_sample_ratio <= 1.0:
        raise ValueError("trace_sample_ratio must be between 0 and 1")
    if settings.log_format not in LOG_FORMATS:
        raise ValueError(f"log_format must be one of {', '.join(LOG_FORMATS)}")
    for name in ("sqlite_writer_cache_mib", "sqlite_reader_cache_mib"):
        if getattr(settings, name) < 1:
            raise ValueError(f"{name} must be at least 1")
    if not 0.0 <= settings.executor_shutdown_grace_s <= MAX_SHUTDOWN_GRACE_S:
        raise ValueError(
            f"executor_shutdown_grace_s must be between 0 and {MAX_SHUTDOWN_GRACE_S:g} (longer "
            "would outlast the launcher's and the server's own stop limits)"
        )
    if not 0 <= settings.metrics_port <= 65535:
        raise ValueError("metrics_port must be a port number (0: off)")
    try:
        webhook_networks(settings)
    except ValueError as exc:
        raise ValueError(f"webhook_allowed_networks: {exc}") from None
    try:
        tool_networks(settings)
    except ValueError as exc:
        raise ValueError(f"tool_allowed_networks: {exc}") from None
