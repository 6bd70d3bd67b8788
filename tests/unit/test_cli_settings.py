"""A bad setting through the real `batchgate` command: one line `error: <setting> (<env>): …`
on stderr and exit 2, for every kind of verb, before anything starts."""

from __future__ import annotations

import asyncio
import json
import math
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from batchgate.exit_codes import ExitCode
from tests.support import clean_environ, free_port, run_cli

GIVE_UP_S = 60.0  # a verb that starts instead of refusing is stopped (process group and all)


def _starting_verb(*args: str, env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    """`batchgate ARGS…` for a verb that starts servers (`up`, `serve`): in its own process
    group, which is killed when the verb did not exit in time (it started, so the test fails)."""
    with subprocess.Popen(
        [sys.executable, "-m", "batchgate.cli", *args],
        env=clean_environ(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    ) as child:
        try:
            out, err = child.communicate(timeout=GIVE_UP_S)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGINT)
            try:
                child.communicate(timeout=30)
            finally:
                os.killpg(child.pid, signal.SIGKILL)
            pytest.fail(f"`batchgate {' '.join(args)}` started instead of refusing its settings")
        return subprocess.CompletedProcess(child.args, child.returncode, out, err)


def _own_ports(data_dir: Path) -> dict[str, str]:
    """Settings of a stack that meets no other (for the verbs that would start one)."""
    first = free_port()
    names = ("PORT", "ENVOY_ADMIN_PORT", "INGEST_PORT", "SCHEDULER_PORT", "RESULTS_PORT", "SIMULATOR_PORT")
    ports = {f"BATCHGATE_{name}": str(free_port()) for name in names}
    return {
        **ports,
        "BATCHGATE_EXECUTOR_PORT": str(first),
        "BATCHGATE_DATA_DIR": str(data_dir),
        "BATCHGATE_INSECURE_INTERNAL": "true",
    }


def _refused(run: subprocess.CompletedProcess[str], setting: str, env: str, problem: str) -> None:
    assert run.returncode == ExitCode.INVALID, run.stderr
    assert run.stderr.splitlines() == [f"error: {setting} ({env}): {problem}"], run.stderr


@pytest.mark.parametrize(
    ("verb", "env", "setting", "problem"),
    [
        (("keys", "list"), {"BATCHGATE_PORT": "abc"}, "port", "'abc' is not a whole number"),
        (
            ("keys", "list"),
            {"BATCHGATE_FILE_EXPIRY_DAYS": "0.0001"},
            "file_expiry_days",
            "'0.0001' is not a whole number",
        ),
        (
            ("migrate",),
            {"BATCHGATE_DATABASE_URL": "mysql://x"},
            "database_url",
            "scheme 'mysql' is not supported: use sqlite+aiosqlite:///PATH or "
            "postgresql+asyncpg://USER@HOST:PORT/DB (empty: SQLite in the data directory)",
        ),
        (
            ("webhooks", "secret"),
            {"BATCHGATE_COMPLETION_WINDOWS": ""},
            "completion_windows",
            "'' names no window (comma-separated <number><unit>, e.g. 24h)",
        ),
        (
            ("batches", "list", "--api-key", "k"),  # a client verb that reads the settings' base URL
            {"BATCHGATE_PORT": "70000"},
            "port",
            "must be 1 to 65535, not 70000",
        ),
    ],
)
def test_a_bad_setting_stops_a_verb_with_one_line_and_exit_2(
    tmp_path: Path, verb: tuple[str, ...], env: dict[str, str], setting: str, problem: str
) -> None:
    run = run_cli(*verb, env={"BATCHGATE_DATA_DIR": str(tmp_path / "data"), **env}, timeout_s=60)
    _refused(run, setting, next(iter(env)), problem)


@pytest.mark.parametrize(
    ("env", "setting", "problem"),
    [
        ({"BATCHGATE_PORT": "abc"}, "port", "'abc' is not a whole number"),
        (
            {"BATCHGATE_LOG_LEVEL": "FOO"},
            "log_level",
            "'FOO' is not a log level (DEBUG, INFO, WARNING, ERROR or CRITICAL)",
        ),
        (
            {"BATCHGATE_EXECUTORS": "-2"},
            "executors",
            "must be 0 or more (0: none, they run elsewhere), not -2",
        ),
    ],
)
def test_up_refuses_a_bad_setting_before_it_starts_anything(
    tmp_path: Path, env: dict[str, str], setting: str, problem: str
) -> None:
    data_dir = tmp_path / "data"
    run = _starting_verb("up", env={**_own_ports(data_dir), **env})
    _refused(run, setting, next(iter(env)), problem)
    assert not data_dir.exists()


def test_up_refuses_two_listeners_on_one_port_before_it_starts_anything(tmp_path: Path) -> None:
    """The simulator on Envoy's port used to fail to bind after the rest had started, and `up`
    ended with a traceback."""
    data_dir = tmp_path / "data"
    ports = _own_ports(data_dir)
    run = _starting_verb("up", env={**ports, "BATCHGATE_SIMULATOR_PORT": ports["BATCHGATE_PORT"]})
    port = ports["BATCHGATE_PORT"]
    problem = f"the simulated upstream would listen on {port}, Envoy's port too"
    _refused(run, "simulator_port", "BATCHGATE_SIMULATOR_PORT", problem)
    assert not data_dir.exists()


def test_up_refuses_a_port_something_else_holds_naming_its_setting(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    ports = _own_ports(data_dir)
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", int(ports["BATCHGATE_INGEST_PORT"])))
        holder.listen()
        run = _starting_verb("up", env=ports)
    assert run.returncode == ExitCode.OTHER, run.stderr
    assert run.stderr.splitlines() == [
        f"error: ingest cannot listen on 127.0.0.1:{ports['BATCHGATE_INGEST_PORT']} "
        "(Address already in use); "
        "is another stack running? Change ingest_port (BATCHGATE_INGEST_PORT) or stop what holds it"
    ]
    assert not data_dir.exists()


def test_settings_that_conflict_stop_a_verb_with_one_line_and_exit_2(tmp_path: Path) -> None:
    env = {"BATCHGATE_EXECUTOR_PORT": "65535", "BATCHGATE_EXECUTORS": "2"}
    run = run_cli("keys", "list", env={"BATCHGATE_DATA_DIR": str(tmp_path / "data"), **env}, timeout_s=60)
    problem = "2 executors listen on 65535 to 65536 (executor_port+N), past 65535"
    _refused(run, "executors", "BATCHGATE_EXECUTORS", problem)


@pytest.mark.parametrize("verb", [("up",), ("serve", "scheduler")])
def test_a_negative_retention_is_refused_at_startup(tmp_path: Path, verb: tuple[str, ...]) -> None:
    """-1 days made every ended batch due at once: the first retention pass purged them all."""
    data_dir = tmp_path / "data"
    run = _starting_verb(*verb, env={**_own_ports(data_dir), "BATCHGATE_RETENTION_DAYS": "-1"})
    _refused(run, "retention_days", "BATCHGATE_RETENTION_DAYS", "must be 0 or more (0 keeps), not -1")
    assert not (data_dir / "batchgate.db").exists()


def test_an_unreadable_config_file_stops_a_verb_with_one_line_and_exit_2(tmp_path: Path) -> None:
    missing = tmp_path / "nonexistent.yaml"
    run = run_cli("--config", str(missing), "keys", "list", timeout_s=60)
    _refused(run, "config", "--config, BATCHGATE_CONFIG", f"cannot read {missing}: No such file or directory")
    broken = tmp_path / "broken.yaml"
    broken.write_text("port: [\n")
    run = run_cli("keys", "list", env={"BATCHGATE_CONFIG": str(broken)}, timeout_s=60)
    _refused(
        run,
        "config",
        "--config, BATCHGATE_CONFIG",
        f"{broken} is not valid YAML (line 2): expected the node content, but found '<stream end>'",
    )


@pytest.mark.parametrize(
    "verb",
    [
        ("keys", "create", "--budget", "inf"),
        ("keys", "create", "--budget", "1e999"),
        ("projects", "set-budget", "default", "inf"),
        ("projects", "set-policy", "default", "--retention-days", "inf"),
    ],
)
def test_an_infinite_amount_is_refused_like_a_negative_one(tmp_path: Path, verb: tuple[str, ...]) -> None:
    """`keys list --json` printed `"budget_usd": Infinity`, which is not JSON."""
    run = run_cli(*verb, env={"BATCHGATE_DATA_DIR": str(tmp_path / "data")}, timeout_s=60)
    assert run.returncode == ExitCode.INVALID, run.stdout + run.stderr
    assert "0 or more" in run.stderr and "(a finite amount)" in run.stderr


def test_an_infinite_budget_stored_before_it_was_refused_lists_as_no_budget(tmp_path: Path) -> None:
    """`keys list --json` printed `"budget_usd": Infinity`, which no JSON parser reads."""
    from batchgate.admin_cli import with_db
    from batchgate.services.common import auth
    from batchgate.services.common.loading import load_settings

    env = {"BATCHGATE_DATA_DIR": str(tmp_path / "data")}
    created = run_cli("keys", "create", "--name", "old", env=env, timeout_s=60)
    assert created.returncode == ExitCode.OK, created.stderr
    key_id = json.loads(run_cli("keys", "list", "--json", env=env, timeout_s=60).stdout)["id"]

    async def store_infinity(db: Any) -> None:
        assert await auth.set_key_budget(db, key_id, math.inf)
        project = await auth.find_project(db, "default")
        assert project is not None and await auth.set_project_budget(db, project, math.inf)

    asyncio.run(with_db(load_settings(environ=env), store_infinity))
    listed = run_cli("keys", "list", "--json", env=env, timeout_s=60)
    assert [json.loads(line)["budget_usd"] for line in listed.stdout.splitlines()] == [None]
    projects = run_cli("projects", "list", env=env, timeout_s=60)
    assert "no budget" in projects.stdout and "inf" not in projects.stdout
