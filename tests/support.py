"""Test helpers: real stacks of batchgate processes on loopback ports, and fresh databases.

`running_stack()` starts the same processes `batchgate up` starts (core, executors, the
simulated upstream, Envoy) with free ports and a private data directory, against SQLite or a
fresh PostgreSQL database, and yields a handle with the REST base URL and an API key.
`replicated_stack()` does the same with every service as its own process and several replicas
of each behind Envoy (PostgreSQL only), as a multi-replica deployment runs them.

Stacks speak the cluster's mutual TLS as deployments do, with one test CA and certificate set
per test session (`session_cert_dir()`); tests that dial an internal service directly get
their channel from `internal_channel()`.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import asyncpg
import grpc
import httpx
from sqlalchemy import Executable, Row, text
from sqlalchemy.engine import make_url

from batchgate.certs import CertDir
from batchgate.health import internal_channel as _internal_channel
from batchgate.launcher import Stack
from batchgate.services.common import auth
from batchgate.services.common.config import Settings
from batchgate.services.common.db import Database
from batchgate.services.common.db.migrate import migrate
from batchgate.services.common.loading import load_settings

T = TypeVar("T")

PG_ENV = "BATCHGATE_TEST_DATABASE_URL"
TERMINAL = ("completed", "failed", "expired", "cancelled")
EXECUTOR_PORTS = 4  # ports kept free for executors 0-3 of a test stack


def _port_pool() -> range:
    """Ports for test listeners: below the kernel's ephemeral range, so no outgoing connection
    (which takes its local port from that range) can hold one between picking and binding."""
    try:
        ephemeral_low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral_low = 32768
    pool = range(max(10_000, ephemeral_low - 12_000), ephemeral_low)
    return _worker_share(pool)


def _worker_share(pool: range) -> range:
    """This pytest-xdist worker's slice of `pool` (all of it outside xdist): workers running side
    by side never pick the same port, even between one's check and its bind."""
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    index = int(worker.removeprefix("gw")) if worker.startswith("gw") else 0
    size = len(pool) // max(count, 1)
    return range(pool.start + index * size, pool.start + (index + 1) * size)


_POOL = _port_pool()
_handed_out: set[int] = set()
_cursor = _POOL.start + (os.getpid() * 7919) % len(_POOL)  # another pytest process starts elsewhere


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port_run(count: int) -> int:
    """A port P such that P … P+count-1 are free now and were never returned to this process
    before (executor N listens on port+N): two stacks of one test run never share a port."""
    global _cursor
    for _ in range(len(_POOL)):
        first = _cursor
        _cursor = first + count if first + 2 * count <= _POOL.stop else _POOL.start
        ports = range(first, first + count)
        if first + count <= _POOL.stop and _handed_out.isdisjoint(ports) and all(map(_bindable, ports)):
            _handed_out.update(ports)
            return first
    raise RuntimeError(f"no {count} free ports left in {_POOL}")


def free_port() -> int:
    return free_port_run(1)


_session_certs: CertDir | None = None


def session_cert_dir() -> CertDir:
    """One CA and a certificate per identity for every stack of this test session (made once;
    removed when the session ends). Tests that change certificates make their own."""
    global _session_certs
    if _session_certs is None:
        path = Path(tempfile.mkdtemp(prefix="batchgate-test-certs-"))
        atexit.register(shutil.rmtree, path, ignore_errors=True)
        _session_certs = CertDir.at(path)
        _session_certs.ensure()
    return _session_certs


def pg_base_url() -> str | None:
    return os.environ.get(PG_ENV) or None


async def _pg_admin(url: str, statement: str) -> None:
    parsed = make_url(url)
    conn = await asyncpg.connect(
        host=parsed.host or "127.0.0.1",
        port=parsed.port or 5432,
        user=parsed.username or "postgres",
        password=parsed.password,
        database=parsed.database or "postgres",
        timeout=10,
    )
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


@contextlib.contextmanager
def fresh_database(kind: str, tmp: Path, prefix: str = "bg_test") -> Iterator[str]:
    """A new empty database URL: a SQLite file under `tmp`, or a new PostgreSQL database
    `<prefix>_<random>` created next to BATCHGATE_TEST_DATABASE_URL (dropped afterwards)."""
    if kind == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp / 'batchgate.db'}"
        return
    base = pg_base_url()
    assert base, f"{PG_ENV} is not set"
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    asyncio.run(_pg_admin(base, f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(base).set(database=name).render_as_string(hide_password=False)
    finally:
        asyncio.run(_pg_admin(base, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


async def prepare_database(url: str, projects: tuple[str, ...] = ("default",)) -> dict[str, str]:
    """Migrate and create one API key per project; returns {project name: secret}."""
    db = Database(url)
    try:
        await migrate(db)
        keys = {}
        for name in projects:
            project = await auth.ensure_project(db, name)
            keys[name] = (await auth.create_key(db, project, name=f"test-{name}")).secret
        return keys
    finally:
        await db.dispose()


def db_rows(url: str, statement: Executable | str, **params: Any) -> list[Row[Any]]:
    """Run one statement against a stack's database from the test process; rows (if any).

    Tests read the database directly to prove what was (not) stored.
    """

    async def run() -> list[Row[Any]]:
        db = Database(url)
        try:
            query: Executable = text(statement) if isinstance(statement, str) else statement
            async with db.write() as conn:
                result = await conn.execute(query, params)
                return list(result.all()) if result.returns_rows else []
        finally:
            await db.dispose()

    return asyncio.run(run())


def add_project(stack: RunningStack, name: str, budget_usd: float | None = None) -> str:
    """A new project with one key (usable as `stack.client(name)`); returns its id."""

    async def run() -> tuple[str, str]:
        db = Database(stack.database_url)
        try:
            project = await auth.ensure_project(db, name)
            key = await auth.create_key(db, project, name=f"test-{name}", budget_usd=budget_usd)
            return project, key.secret
        finally:
            await db.dispose()

    project, secret = asyncio.run(run())
    stack.keys[name] = secret
    return project


@dataclass
class RunningStack:
    settings: Settings
    stack: Stack
    keys: dict[str, str]
    env: dict[str, str]
    log_dir: Path
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return self.keys["default"]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.settings.port}/v1"

    @property
    def grpc_target(self) -> str:
        return f"127.0.0.1:{self.settings.port}"

    @property
    def database_url(self) -> str:
        return self.settings.resolved_database_url

    def client(self, project: str = "default", **kwargs: Any) -> Any:
        from openai import OpenAI

        return OpenAI(base_url=self.base_url, api_key=self.keys[project], max_retries=0, **kwargs)

    def simulator_stats(self) -> dict[str, Any]:
        return httpx.get(f"http://127.0.0.1:{self.settings.simulator_port}/_sim/stats", timeout=10).json()

    def logs(self) -> str:
        parts = []
        for path in sorted(self.log_dir.glob("*.log")):
            parts.append(f"===== {path.name} =====\n{path.read_text(errors='replace')[-20000:]}")
        return "\n".join(parts)


def stack_env(tmp: Path, database_url: str, **extra: str) -> dict[str, str]:
    ports = {
        name: free_port()
        for name in (
            "PORT",
            "ENVOY_ADMIN_PORT",
            "INGEST_PORT",
            "SCHEDULER_PORT",
            "RESULTS_PORT",
            "SIMULATOR_PORT",
        )
    }
    env = {f"BATCHGATE_{name}": str(port) for name, port in ports.items()}
    env["BATCHGATE_EXECUTOR_PORT"] = str(free_port_run(EXECUTOR_PORTS))
    env.update(
        {
            "BATCHGATE_DATA_DIR": str(tmp),
            "BATCHGATE_TLS_DIR": str(session_cert_dir().path),
            "BATCHGATE_DATABASE_URL": database_url,
            "BATCHGATE_SIMULATOR_LATENCY_MS": "5",
            "BATCHGATE_LOG_LEVEL": "INFO",
            # Webhook receivers in tests listen on loopback; retry them quickly.
            "BATCHGATE_WEBHOOK_ALLOWED_NETWORKS": "127.0.0.0/8",
            "BATCHGATE_WEBHOOK_RETRY_INITIAL_S": "0.2",
            "BATCHGATE_WEBHOOK_TIMEOUT_S": "2",
            # A test's slow calls still running at teardown are cut after 1 s, not 10
            # (tests/reliability/test_executor_stop.py checks the grace itself).
            "BATCHGATE_EXECUTOR_SHUTDOWN_GRACE_S": "1",
            # A key's policy or revocation reaches the servers within this (and `keys revoke`
            # waits it out); the tests that check it read it from the stack's settings.
            "BATCHGATE_AUTH_CACHE_S": "1",
        }
    )
    env.update(extra)
    return env


@contextlib.contextmanager
def _stack_running(
    tmp: Path,
    database_url: str,
    projects: tuple[str, ...],
    env: dict[str, str],
    start: Callable[[Stack], None] | None,
    extra: dict[str, Any] | None = None,
) -> Iterator[RunningStack]:
    """Prepare the database, `start(stack)`, wait until ready; on exit stop it and, on a
    failure, print the logs (they stay under `tmp/logs`)."""
    settings = load_settings(environ=env)
    keys = asyncio.run(prepare_database(database_url, projects))
    # The suite's own BATCHGATE_* environment must not leak into the stack.
    stack = Stack(settings, env=env, log_dir=tmp / "logs", inherit_settings=False)
    running = RunningStack(settings, stack, keys, env, tmp / "logs", extra or {})
    try:
        if start is not None:
            start(stack)
            stack.wait_ready()
        yield running
    except BaseException:
        print(running.logs())
        raise
    finally:
        stack.stop()


@contextlib.contextmanager
def running_stack(
    tmp: Path, database_url: str, projects: tuple[str, ...] = ("default",), start: bool = True, **extra: str
) -> Iterator[RunningStack]:
    """Start a full stack; on exit stop it. Logs stay under `tmp/logs`."""
    env = stack_env(tmp, database_url, **extra)
    with _stack_running(tmp, database_url, projects, env, Stack.start_all if start else None) as running:
        yield running


def internal_channel(
    stack: RunningStack, service: str, identity: str = "executor", port: int | None = None
) -> grpc.Channel:
    """A blocking channel to the stack's `service` (on `port`, default its first replica's) as
    `identity`, with that identity's certificate of the stack's CA."""
    if port is None:
        port = getattr(stack.settings, f"{service}_port")
    return _internal_channel(stack.settings, f"127.0.0.1:{port}", service, identity)


REPLICATED_SERVICES = ("ingest", "scheduler", "results", "executor")


@contextlib.contextmanager
def replicated_stack(
    tmp: Path,
    database_url: str,
    replicas: Mapping[str, int],
    projects: tuple[str, ...] = ("default",),
    **extra: str,
) -> Iterator[RunningStack]:
    """Every service as its own processes, `replicas[service]` of each (default 1), each replica
    on its own port; Envoy balances over the ingest and results replicas, and the services
    reach each other through the `*_ADDRS` lists. PostgreSQL only (every replica writes).

    `running.extra["ports"][service]` lists the replicas' ports, in the order of the children
    named `<service>-<n>` in `running.stack.children`.
    """
    assert database_url.startswith("postgresql"), "several replicas need PostgreSQL"
    ports = {s: [free_port() for _ in range(replicas.get(s, 1))] for s in REPLICATED_SERVICES}
    env = stack_env(tmp, database_url, **extra)
    for service in ("ingest", "scheduler", "results"):
        env[f"BATCHGATE_{service.upper()}_ADDRS"] = ",".join(f"127.0.0.1:{p}" for p in ports[service])

    def start(stack: Stack) -> None:
        if stack.settings.uses_simulator:
            stack.start_simulator()
        for service in REPLICATED_SERVICES:
            for replica, port in enumerate(ports[service]):
                stack.start_service(service, replica, port)
        stack.start_envoy()

    with _stack_running(tmp, database_url, projects, env, start, {"ports": ports}) as running:
        yield running


def jsonl(records: list[dict[str, Any]]) -> bytes:
    return ("\n".join(json.dumps(r) for r in records) + "\n").encode()


def chat_records(
    n: int, model: str = "gpt-4o-mini", prefix: str = "req", **body: Any
) -> list[dict[str, Any]]:
    return [
        {
            "custom_id": f"{prefix}-{i}",
            "method": "POST",
            "url": "/v1/chat/completions",
            "body": {
                "model": model,
                "messages": [{"role": "user", "content": f"{prefix} message {i}"}],
                **body,
            },
        }
        for i in range(n)
    ]


def upload(client: Any, records: list[dict[str, Any]] | bytes, name: str = "input.jsonl") -> Any:
    data = records if isinstance(records, bytes) else jsonl(records)
    return client.files.create(file=(name, io.BytesIO(data)), purpose="batch")


def wait_for_batch(
    client: Any,
    batch_id: str,
    timeout_s: float = 120.0,
    statuses: tuple[str, ...] = TERMINAL,
) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        batch = client.batches.retrieve(batch_id)
        if batch.status in statuses:
            return batch
        if time.monotonic() > deadline:
            raise TimeoutError(f"batch {batch_id} still {batch.status}: {batch.request_counts}")
        time.sleep(0.1)


def read_jsonl(data: bytes | str) -> list[dict[str, Any]]:
    """JSONL lines end at `\n` only: `str.splitlines()` would also split inside strings that
    hold U+0085, U+2028 and the like, which JSON writers leave unescaped."""
    text = data.decode() if isinstance(data, bytes) else data
    return [json.loads(line) for line in text.split("\n") if line.strip()]


def eventually(probe: Callable[[], T | None], timeout_s: float = 60.0) -> T:
    """`probe()`'s first truthy answer, asked every 0.2 s; fails after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = probe()
        if found:
            return found
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


def clean_environ(env: Mapping[str, str]) -> dict[str, str]:
    """This process's environment without the suite's BATCHGATE_* variables, plus `env`."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("BATCHGATE_")}
    environ.update(env)
    return environ


def run_cli(
    *args: str, env: Mapping[str, str] | None = None, timeout_s: float = 180.0
) -> subprocess.CompletedProcess[str]:
    """`batchgate ARGS…` as a subprocess with pipes (so stderr is not a TTY); the suite's own
    BATCHGATE_* variables are dropped, `env` added."""
    return subprocess.run(
        [sys.executable, "-m", "batchgate.cli", *args],
        env=clean_environ(env or {}),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
