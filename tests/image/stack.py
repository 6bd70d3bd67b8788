"""compose.yaml's batchgate services as containers of the built image, started as
`docker compose up` starts them, on the host's network.

Debian's Compose (docker-compose 1.29) cannot read compose.yaml: it predates the file's `name`,
`env_file.required` and health check `start_interval`; Compose v2 is not in Debian bookworm, and
its downloads (Docker's apt repository, GitHub releases) are out of reach here. So the file is
read with tests/compose.py (the reading the compose tests check)
and each step Compose would take is one Engine API call: per service and replica a container
with the service's command, environment, `init`, restart policy, bind mounts, named volumes
(made for the run) and health check, started in `depends_on` order, each waited on as its
dependents' conditions say (completed successfully, healthy); at the end a stop with the
service's `stop_grace_period`.

Where it differs from `docker compose up`, and why:
- Host networking, no bridge network. Every container shares the host's network, so the
  addresses the file gives by service name (`ingest:50051`) become 127.0.0.1 and each port a
  free local one (`Topology`, as for the compose tests' processes), a second executor gets its
  own, and every service listens on 127.0.0.1 only. Names in each container's /etc/hosts
  instead would not hold either: for a name with only an IPv4 entry there, Envoy's resolver
  (IPv6 first) answers [::1], where nothing listens; Compose's DNS answers no AAAA instead.
- Health checks run every `start_interval` from the start, as a newer engine does during
  `start_period` (the 20.10 engine of Debian's docker.io has no `start_interval`, API 1.44).
- Services run one after the other, each healthy before the next starts: stricter than
  Compose, which starts independent services at once.
- Only batchgate's own services run: the machine's PostgreSQL stands in for `postgres`, and the
  test's OTLP sink for the collector; the optional `batchgate.env` is not read.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import docker
from docker.models.containers import Container

from tests.compose import ROOT, Topology, duration_s, healthcheck_argv
from tests.image.engine import LABEL

NS = 1_000_000_000
HEALTHY_S = 120


@dataclass
class Stopped:
    exit_code: int
    restarts: int


@dataclass
class ContainerCompose(Topology):
    """The batchgate services of a compose file as containers (see the module docstring)."""

    client: docker.DockerClient = field(kw_only=True)
    image: str = field(kw_only=True)
    run_id: str = field(kw_only=True, default_factory=lambda: uuid.uuid4().hex[:8])
    containers: list[tuple[str, Container]] = field(default_factory=list, init=False)
    """(service, container) in start order."""

    def environment(self, name: str, replica: int = 0) -> dict[str, str]:
        env = super().environment(name, replica)
        env["BATCHGATE_HOST"] = "127.0.0.1"  # the host's network: listen on loopback only
        return env

    def _volumes(self, name: str) -> dict[str, dict[str, str]]:
        """Bind mounts from the repository; named volumes as this run's own volumes."""
        mounts = {}
        for entry in self.services[name].get("volumes") or []:
            source, target, *mode = str(entry).split(":")
            if source.startswith((".", "/")):
                source = str((ROOT / source).resolve())
            else:
                source = f"bgimg-{self.run_id}-{source}"
                with contextlib.suppress(docker.errors.APIError):
                    self.client.volumes.create(source, labels={LABEL: self.run_id})
            mounts[source] = {"bind": target, "mode": mode[0] if mode else "rw"}
        return mounts

    def _healthcheck(self, name: str) -> dict[str, Any] | None:
        check = self.services[name].get("healthcheck") or {}
        if healthcheck_argv(self.services[name]) is None:
            return None
        every = duration_s(str(check.get("start_interval") or check.get("interval", "30s")))
        return {
            "test": check["test"],
            "interval": int(every * NS),
            "timeout": int(duration_s(str(check.get("timeout", "30s"))) * NS),
            "retries": int(check.get("retries", 3)),
            "start_period": int(duration_s(str(check.get("start_period", "0s"))) * NS),
        }

    def _options(self, name: str, replica: int) -> dict[str, Any]:
        service = self.services[name]
        policy, _, retries = str(service.get("restart", "no")).partition(":")  # on-failure[:N]
        return {
            "name": f"bgimg-{self.run_id}-{name}-{replica}",
            "labels": {LABEL: self.run_id},
            "environment": self.environment(name, replica),
            "network_mode": "host",
            "init": bool(service.get("init")),
            "restart_policy": {"Name": policy, **({"MaximumRetryCount": int(retries)} if retries else {})},
            "volumes": self._volumes(name),
            "healthcheck": self._healthcheck(name),
        }

    def run_once(self, name: str, command: list[str] | None = None, timeout_s: float = 300) -> str:
        """`docker compose run --rm NAME [COMMAND]`: returns stdout, fails on a non-zero exit."""
        options = self._options(name, 0)
        options["name"] += f"-run-{uuid.uuid4().hex[:6]}"
        argv = command or [str(part) for part in self.services[name]["command"]]
        container = self.client.containers.create(self.image, argv, **options)
        try:
            container.start()
            status = container.wait(timeout=timeout_s)
            stdout = container.logs(stdout=True, stderr=False).decode()
            stderr = container.logs(stdout=False, stderr=True).decode()
        finally:
            container.remove(force=True)
        assert status["StatusCode"] == 0, f"{name} {argv} exited {status['StatusCode']}: {stderr}"
        return stdout

    def start(self, name: str, replica: int) -> Container:
        command = [str(part) for part in self.services[name]["command"]]
        container = self.client.containers.create(self.image, command, **self._options(name, replica))
        self.containers.append((name, container))
        container.start()
        return container

    @staticmethod
    def wait_healthy(container: Container, timeout_s: float = HEALTHY_S) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            container.reload()
            state = container.attrs["State"]
            health = (state.get("Health") or {}).get("Status")
            if health == "healthy":
                return
            if state["Status"] in ("exited", "dead") or state.get("Restarting") or health == "unhealthy":
                raise RuntimeError(f"{container.name} is {state['Status']} ({health}) before it was healthy")
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{container.name} is not healthy after {timeout_s} s: {state.get('Health')}"
                )
            time.sleep(0.5)

    def stop(self) -> dict[str, Stopped]:
        """`docker compose stop`, dependents first, each given its `stop_grace_period`."""
        stopped = {}
        for name, container in reversed(self.containers):
            grace = duration_s(str(self.services[name].get("stop_grace_period", "10s")))
            container.stop(timeout=int(grace))
            container.reload()
            state = container.attrs["State"]
            stopped[container.name] = Stopped(int(state["ExitCode"]), int(container.attrs["RestartCount"]))
        return stopped

    def logs(self) -> str:
        parts = []
        for _, container in self.containers:
            with contextlib.suppress(docker.errors.APIError):
                text = container.logs(tail=200).decode(errors="replace")
                parts.append(f"===== {container.name} =====\n{text}")
        return "\n".join(parts)

    def remove(self) -> None:
        """`docker compose down --volumes`: this run's containers and volumes."""
        for container in self.client.containers.list(all=True, filters={"label": f"{LABEL}={self.run_id}"}):
            container.remove(force=True)
        for volume in self.client.volumes.list(filters={"label": f"{LABEL}={self.run_id}"}):
            volume.remove(force=True)

    @contextlib.contextmanager
    def running(self) -> Iterator[ContainerCompose]:
        try:
            for name in self.active():
                if str(self.services[name].get("restart")) == "no":
                    self.run_once(name)  # a one-shot job: its dependents wait for its success
                    continue
                for replica in range(self.scale.get(name, 1)):
                    container = self.start(name, replica)
                    if self._healthcheck(name) is not None:
                        self.wait_healthy(container)
            yield self
        except BaseException:
            print(self.logs())
            raise
        finally:
            self.remove()
