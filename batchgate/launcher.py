"""Starting and stopping a whole batchgate stack as local processes (`batchgate up`, tests).

One process hosts ingest, scheduler and results (SQLite allows one writing process); each
executor is its own process; the simulated upstream runs when no provider is configured;
Envoy runs in its own session so a terminal's Ctrl-C reaches it only through us, and it is
stopped by PID. Children get the parent's environment plus the overrides given here.
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

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from gateway import launcher as envoy_launcher
from services.common.config import Settings

STOP_TIMEOUT_S = 20.0
CORE_SERVICES = ("ingest", "scheduler", "results")


@dataclass
class Child:
    name: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    """Settings for this process only, over the stack's (e.g. a second scheduler's port)."""
    process: subprocess.Popen[bytes] | None = None
    log: IO[bytes] | None = None


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

    def _spawn(self, child: Child, new_session: bool = False) -> Child:
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
            start_new_session=new_session,
        )
        self.children.append(child)
        return child

    def start_core(self) -> None:
        self._spawn(Child("core", serve_argv(*CORE_SERVICES)))

    def start_services(self, name: str, *services: str, env: dict[str, str] | None = None) -> Child:
        """Any services in one process, with settings of its own: how replicas are run (e.g.
        a second scheduler on PostgreSQL: `start_services("scheduler-2", "scheduler",
        env={"BATCHGATE_SCHEDULER_PORT": "…"})`)."""
        return self._spawn(Child(name, serve_argv(*services), env=dict(env or {})))

    def start_executor(self, index: int) -> Child:
        return self._spawn(Child(f"executor-{index}", serve_argv("executor", extra=("--index", str(index)))))

    def start_simulator(self) -> None:
        self._spawn(Child("simulator", [sys.executable, "-m", "batchgate.cli", "simulate"]))

    def start_envoy(self) -> None:
        config_path = Path(self.settings.data_dir) / "envoy.yaml"
        self._spawn(Child("envoy", envoy_launcher.command(self.settings, config_path)), new_session=True)

    def start_all(self) -> None:
        if self.settings.uses_simulator:
            self.start_simulator()
        self.start_core()
        for index in range(self.settings.executors):
            self.start_executor(index)
        self.start_envoy()

    def wait_ready(self, timeout_s: float = 60.0, extra_grpc_ports: tuple[int, ...] = ()) -> None:
        """Until every service (and each of `extra_grpc_ports`) answers its health check and
        Envoy accepts connections."""
        deadline = time.monotonic() + timeout_s
        ports = [self.settings.ingest_port, self.settings.scheduler_port, self.settings.results_port]
        ports += [self.settings.executor_port + i for i in range(self.settings.executors)]
        ports += list(extra_grpc_ports)
        for port in ports:
            _wait_grpc_health(f"127.0.0.1:{port}", deadline, self)
        _wait_tcp(self.settings.port, deadline, self)
        if self.settings.uses_simulator:
            _wait_tcp(self.settings.simulator_port, deadline, self)

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
        """Envoy first (no new requests), then executors (they drain), then the other services
        (core, replicas), then the upstream."""
        order = {"envoy": 0, "simulator": 3}
        ranked = sorted(
            self.children, key=lambda c: order.get(c.name, 1 if c.name.startswith("executor") else 2)
        )
        for child in ranked:
            self.stop_child(child)
        self.children.clear()


def _check_alive(stack: Stack) -> None:
    dead = stack.dead_children()
    if dead:
        names = ", ".join(f"{c.name} (exit {c.process.returncode})" for c in dead if c.process)
        raise RuntimeError(f"stopped while starting: {names}")


def _wait_grpc_health(target: str, deadline: float, stack: Stack) -> None:
    with grpc.insecure_channel(target) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        while True:
            _check_alive(stack)
            try:
                answer = stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=1.0)
                if answer.status == health_pb2.HealthCheckResponse.SERVING:
                    return
            except grpc.RpcError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"{target} did not become healthy")
            time.sleep(0.1)


def _wait_tcp(port: int, deadline: float, stack: Stack) -> None:
    while True:
        _check_alive(stack)
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1.0):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"port {port} did not open")
        time.sleep(0.1)
