"""Loading the settings: defaults ← YAML file ← environment ← explicit overrides, parsed and
checked once here (against `batchgate.services.common.setting_checks`), so that a bad value is a
startup error naming the setting (`SettingError`) and nothing re-parses it later.

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
    expand_env,
    parse_catalogue,
    simulated_catalogue,
)
from batchgate.services.common.config import Settings
from batchgate.services.common.setting_checks import MAX_CUSTOM_ID_COLUMN as MAX_CUSTOM_ID_COLUMN
from batchgate.services.common.setting_checks import SettingError, conflict, problem

CONFIG = ("config", "--config, BATCHGATE_CONFIG")  # how errors name the YAML file's settings

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


def _int(raw: Any) -> int:
    if isinstance(raw, float) and raw.is_integer():
        return int(raw)
    if isinstance(raw, bool) or not isinstance(raw, int | str):
        raise ValueError(f"{raw!r} is not a whole number")
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{raw!r} is not a whole number") from None


def _float(raw: Any) -> float:
    if isinstance(raw, bool) or not isinstance(raw, int | float | str):
        raise ValueError(f"{raw!r} is not a number")
    try:
        return float(raw)
    except ValueError:
        raise ValueError(f"{raw!r} is not a number") from None


def _cast(raw: Any, type_name: str) -> Any:
    """Settings' annotations are strings (postponed evaluation): int, float, bool or str."""
    casts: dict[str, Callable[[Any], Any]] = {"int": _int, "float": _float, "bool": _bool}
    return casts.get(type_name, str)(raw)


def _from_file(path: str, environ: Mapping[str, str]) -> dict[str, Any]:
    try:
        doc = yaml.safe_load(Path(path).read_text()) or {}
    except OSError as exc:
        raise SettingError(*CONFIG, f"cannot read {path}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" (line {where.line + 1})" if where is not None else ""
        raise SettingError(
            *CONFIG, f"{path} is not valid YAML{line}: {getattr(exc, 'problem', exc)}"
        ) from None
    if not isinstance(doc, dict):
        raise SettingError(*CONFIG, f"{path}: expected a mapping at the top level")
    scalar_names = {f.name for f in env_fields()}
    unknown = set(doc) - scalar_names - set(CATALOGUE_KEYS)
    if unknown:
        raise SettingError(*CONFIG, f"{path}: unknown settings {sorted(unknown, key=str)}")
    try:
        catalogue = parse_catalogue(doc, environ)
        scalars = {k: expand_env(v, environ, k) for k, v in doc.items() if k in scalar_names}
    except ValueError as exc:
        raise SettingError(*CONFIG, f"{path}: {exc}") from None
    return {**scalars, **catalogue}


def load_settings(
    config_file: str | None = None, environ: Mapping[str, str] | None = None, **overrides: Any
) -> Settings:
    """Defaults ← YAML file ← environment ← explicit overrides; `SettingError` (a ValueError
    naming the setting) when a value is bad."""
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
            try:
                values[f.name] = _cast(values[f.name], str(f.type))
            except ValueError as exc:
                raise SettingError(f.name, f.metadata["env"], str(exc)) from None
    settings = Settings(**values)
    for f in env_fields():
        wrong = problem(f.name, getattr(settings, f.name))
        if wrong:
            raise SettingError(f.name, f.metadata["env"], wrong)
    clash = conflict(settings)
    if clash:
        name, wrong = clash
        raise SettingError(name, Settings.__dataclass_fields__[name].metadata["env"], wrong)
    if not settings.providers:
        providers, models = simulated_catalogue(settings.simulator_host, settings.simulator_port)
        settings = dataclasses.replace(settings, providers=providers, models=settings.models or models)
    try:
        served = check_catalogue(retry=settings.retry, providers=settings.providers, models=settings.models)
    except ValueError as exc:
        raise SettingError(*CONFIG, f"{path}: {exc}" if path else str(exc)) from None
    return dataclasses.replace(settings, models=served)
