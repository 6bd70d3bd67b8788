"""Starting and stopping a whole batchgate stack as local processes (`batchgate up`, tests).

One process hosts ingest, scheduler and results (SQLite allows one writing process); each
executor is its own process; the simulated upstream runs when no provider is configured;
Envoy runs in its own session so a terminal's Ctrl-C reaches it only through us, and it is
stopped by PID. Children get the parent's environment plus the overrides given here.
On PostgreSQL every service can also run as several replicas, each its own process with its
own port (`start_service`); tests use that for multi-replica runs.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from batchgate.gateway import launcher as envoy_launcher
from batchgate.health import grpc_serving, internal_channel
from batchgate.services.common import authz
from batchgate.services.common.config import Settings
from batchgate.services.common.setting_checks import SettingError

STOP_TIMEOUT_S = 20.0
CORE_SERVICES = ("ingest", "scheduler", "results")
# Stop order by role: Envoy first (no new requests), then executors (they drain), then the
# services they report to, then the upstream.
STOP_ORDER = {"envoy": 0, "executor": 1, "core": 2, "ingest": 2, "scheduler": 2, "results": 2, "simulator": 3}


@dataclass
class Child:
    name: str
    argv: list[str]
    process: subprocess.Popen[bytes] | None = None
    log: IO[bytes] | None = None
    role: str = ""
    """What it runs (a STOP_ORDER key); defaults to its name."""
    env: dict[str, str] = field(default_factory=dict)
    """Overrides for this process only (e.g. a replica's own port)."""
    grpc_health: tuple[tuple[str, str], ...] = ()
    """(host:port, service) of the gRPC health services it must serve before the stack is ready."""
    tcp_port: int | None = None
    """A loopback port it must accept connections on before the stack is ready."""
    new_session: bool = False
    """Started in a session of its own (Envoy: a terminal's Ctrl-C reaches it through `up`)."""


def serve_argv(*services: str, extra: tuple[str, ...] = ()) -> list[str]:
    return [sys.executable, "-m", "batchgate.cli", "serve", *services, *extra]


@dataclass
class Stack:
    """The processes of one stack. `env` holds BATCHGATE_* overrides for every child."""

    settings: Settings
    env: dict[str, str] = field(default_factory=dict)
    log_dir: Path | None = None
    inherit_settings: bool = True
    """Whether children see this process's own BATCHGATE_* variables (tests turn it off)."""
    children: list[Child] = field(default_factory=list)

    def _environ(self, child: Child) -> dict[str, str]:
        environ = {
            k: v for k, v in os.environ.items() if self.inherit_settings or not k.startswith("BATCHGATE_")
        }
        environ.update(self.env)
        environ.update(child.env)
        environ.setdefault("PYTHONUNBUFFERED", "1")
        return environ

    def spawn(self, child: Child) -> Child:
        """Start any process as part of the stack (stopped with it, in its role's order)."""
        stdout: IO[bytes] | int | None = None
        if self.log_dir is not None:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            child.log = open(self.log_dir / f"{child.name}.log", "ab")  # noqa: SIM115 - closed in stop()
            stdout = child.log
        child.process = subprocess.Popen(
            child.argv,
            env=self._environ(child),
            stdout=stdout,
            stderr=subprocess.STDOUT if stdout else None,
            start_new_session=child.new_session,
        )
        self.children.append(child)
        return child

    def restart(self, child: Child) -> None:
        """Start a child that exited again, as it was started (what a supervisor does)."""
        self.children.remove(child)
        if child.log is not None:
            child.log.close()
            child.log = None
        self.spawn(child)

    def start_core(self) -> None:
        health = tuple((f"127.0.0.1:{getattr(self.settings, f'{s}_port')}", s) for s in CORE_SERVICES)
        self.spawn(Child("core", serve_argv(*CORE_SERVICES), grpc_health=health))

    def start_executor(self, index: int) -> Child:
        return self.spawn(
            Child(
                f"executor-{index}",
                serve_argv("executor", extra=("--index", str(index))),
                role="executor",
                grpc_health=((f"127.0.0.1:{self.settings.executor_port + index}", "executor"),),
            )
        )

    def start_service(self, service: str, replica: int, port: int) -> Child:
        """One replica of one service in its own process, listening on `port` (PostgreSQL only:
        every replica writes the database)."""
        return self.spawn(
            Child(
                f"{service}-{replica}",
                serve_argv(service),
                role=service,
                env={f"BATCHGATE_{service.upper()}_PORT": str(port)},
                grpc_health=((f"127.0.0.1:{port}", service),),
            )
        )

    def start_simulator(self) -> None:
        self.spawn(
            Child(
                "simulator",
                [sys.executable, "-m", "batchgate.cli", "simulate"],
                tcp_port=self.settings.simulator_port,
            )
        )

    def start_envoy(self) -> None:
        config_path = Path(self.settings.data_dir) / "envoy.yaml"
        child = Child("envoy", [], tcp_port=self.settings.port, new_session=True)
        # The config is rendered here, from the environment Envoy's siblings get (OTEL_*).
        child.argv = envoy_launcher.command(self.settings, config_path, self._environ(child))
        self.spawn(child)

    def start_all(self) -> None:
        if self.settings.uses_simulator:
            self.start_simulator()
        self.start_core()
        for index in range(self.settings.executors):
            self.start_executor(index)
        self.start_envoy()

    def wait_ready(self, timeout_s: float = 60.0) -> None:
        """Until every service answers its health check and Envoy (and the simulator) accept
        connections."""
        deadline = time.monotonic() + timeout_s
        for child in list(self.children):
            for target, service in child.grpc_health:
                _wait_grpc_health(target, service, deadline, self)
        for child in list(self.children):
            if child.tcp_port is not None:
                _wait_tcp(child.tcp_port, deadline, self)

    def dead_children(self) -> list[Child]:
        return [c for c in self.children if c.process is not None and c.process.poll() is not None]

    def stop_child(self, child: Child, sig: int = signal.SIGTERM, timeout_s: float = STOP_TIMEOUT_S) -> None:
        process = child.process
        if process is None:
            return
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(sig)
            try:
                process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if child.log is not None:
            child.log.close()
            child.log = None

    def stop(self) -> None:
        """Every child, in STOP_ORDER."""
        for child in sorted(self.children, key=lambda c: STOP_ORDER.get(c.role or c.name, 1)):
            self.stop_child(child)
        self.children.clear()


class StartError(RuntimeError):
    """A child of the stack exited, or did not get ready, before the stack was up."""


@dataclass(frozen=True)
class Port:
    """A port `batchgate up` listens on: the setting it comes from, and who listens."""

    setting: str
    number: int
    host: str
    listener: str


def local_ports(settings: Settings) -> list[Port]:
    """Every port the whole stack on this host listens on (`Stack.start_all`)."""
    s = settings
    ports = [
        Port("port", s.port, s.host, "Envoy"),
        Port("envoy_admin_port", s.envoy_admin_port, s.envoy_admin_host, "Envoy's admin"),
        *(Port(f"{name}_port", getattr(s, f"{name}_port"), s.host, name) for name in CORE_SERVICES),
        *(Port("executor_port", s.executor_port + i, s.host, f"executor {i}") for i in range(s.executors)),
    ]
    if s.uses_simulator:
        ports.append(Port("simulator_port", s.simulator_port, s.host, "the simulated upstream"))
    if s.metrics_port:
        ports.append(Port("metrics_port", s.metrics_port, s.metrics_host, "the services' metrics"))
        ports += [
            Port("metrics_port", s.metrics_port + 1 + i, s.metrics_host, f"executor {i}'s metrics")
            for i in range(s.executors)
        ]
    return ports


def check_ports(settings: Settings) -> None:
    """Refuse to start on a port two listeners would share (`SettingError`) or one that
    something else already holds (`StartError`), before any child starts: naming the setting
    beats a child's bind traceback and a half-started stack."""
    taken: dict[int, Port] = {}
    for port in local_ports(settings):
        env = Settings.__dataclass_fields__[port.setting].metadata["env"]
        first = taken.setdefault(port.number, port)
        if first is not port:
            raise SettingError(
                port.setting,
                env,
                f"{port.listener} would listen on {port.number}, {first.listener}'s port too",
            )
        with socket.socket(socket.AF_INET6 if ":" in port.host else socket.AF_INET) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the listeners do
            try:
                probe.bind((port.host, port.number))
            except OSError as exc:
                raise StartError(
                    f"{port.listener} cannot listen on {port.host}:{port.number} ({exc.strerror}); "
                    f"is another stack running? Change {port.setting} ({env}) or stop what holds it"
                ) from None


def _check_alive(stack: Stack) -> None:
    dead = stack.dead_children()
    if dead:
        names = ", ".join(f"{c.name} (exit {c.process.returncode})" for c in dead if c.process)
        raise StartError(f"stopped while starting: {names}")


def _wait_grpc_health(target: str, service: str, deadline: float, stack: Stack) -> None:
    # The port first: a channel whose first try finds it closed tries again only after gRPC's
    # default backoff (a second), well after the service listened.
    _wait_tcp(int(target.rsplit(":", 1)[1]), deadline, stack)
    with internal_channel(stack.settings, target, service, authz.OPERATOR) as channel:
        while True:
            _check_alive(stack)
            if grpc_serving(channel, timeout_s=1.0):
                return
            if time.monotonic() > deadline:
                raise StartError(f"{target} did not become healthy")
            time.sleep(0.1)


def _wait_tcp(port: int, deadline: float, stack: Stack) -> None:
    while True:
        _check_alive(stack)
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1.0):
            return
        if time.monotonic() > deadline:
            raise StartError(f"port {port} did not open")
        time.sleep(0.1)
