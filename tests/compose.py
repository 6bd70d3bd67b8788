"""compose.yaml and the Dockerfile, read as Docker reads them, and run as local processes.

The CI machines have no container engine, so the tests prove the deployment files in two
steps. `problems()` checks compose.yaml against the Compose specification's rules that matter
here and against batchgate's own config module and CLI. `LocalCompose` then starts every
batchgate service the file declares (same command, same environment, the image's ENV
included) as local processes: service host names become 127.0.0.1, every port a free one,
and services start in `depends_on` order, each waiting on the health checks the file declares,
as Compose does. Services that run third-party images (postgres, the OpenTelemetry collector,
Jaeger) are not started: the test supplies stand-ins (the CI PostgreSQL, an OTLP sink).
`Topology` (which services, in what order, with what environment on one host) is shared with
tests/image/stack.py, which runs the same services as containers of the built image.
"""

from __future__ import annotations

import contextlib
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from batchgate.cli import build_parser
from batchgate.launcher import Child, Stack
from batchgate.services.common.loading import env_fields, load_settings
from tests.otlp_sink import OtlpSink
from tests.support import chat_records, clean_environ, free_port, read_jsonl, upload, wait_for_batch

ROOT = Path(__file__).resolve().parent.parent
COMPOSE_FILE = ROOT / "compose.yaml"
DOCKERFILE = ROOT / "Dockerfile"
BATCHGATE_BIN = str(Path(sys.executable).parent / "batchgate")

TOP_LEVEL_KEYS = {"name", "services", "volumes", "networks", "configs", "secrets", "include"}
SERVICE_KEYS = {
    "image", "build", "command", "entrypoint", "environment", "env_file", "ports", "expose",
    "volumes", "depends_on", "healthcheck", "restart", "profiles", "init", "stop_grace_period",
    "stop_signal", "deploy", "user", "working_dir", "labels", "networks", "logging", "ulimits",
    "read_only", "tmpfs", "cap_drop", "security_opt", "shm_size", "container_name",
}  # fmt: skip
HEALTHCHECK_KEYS = {"test", "interval", "timeout", "retries", "start_period", "start_interval", "disable"}
RESTART_POLICIES = {"no", "always", "on-failure", "unless-stopped"}
CONDITIONS = {"service_started", "service_healthy", "service_completed_successfully"}
DURATION = re.compile(r"^(\d+(\.\d+)?(us|ms|s|m|h))+$")
DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(us|ms|s|m|h)")
DURATION_UNIT_S = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
PORT_MAPPING = re.compile(r"^(?:(?P<ip>[\d.]+):)?(?:(?P<host>\d+):)?(?P<container>\d+)(?:/(tcp|udp))?$")
HOST_PORT = re.compile(r"(?P<host>[A-Za-z][A-Za-z0-9_.-]*):(?P<port>\d+)")
# `${NAME}`, `${NAME:-default}`, `${NAME-default}`, `${NAME:?err}`, `${NAME:+alt}`, `$NAME`, `$$`.
VARIABLE = re.compile(r"\$(?:(?P<escaped>\$)|\{(?P<braced>[^}]*)\}|(?P<named>[A-Za-z_][A-Za-z0-9_]*))")
BRACED = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?+])(?P<arg>.*))?$", re.S)
ROLES = ("ingest", "scheduler", "results", "executor", "envoy", "simulator", "migrate", "certs")
LONG_RUNNING = {"ingest", "scheduler", "results", "executor", "envoy", "simulator"}
ONE_SHOT = {"migrate": "the migration", "certs": "the certificates"}
# Roles that call or serve internal gRPC: they need the certificates the `certs` job writes.
TLS_ROLES = {"ingest", "scheduler", "results", "executor", "envoy"}
# Ports a replica listens on: a second replica on one host needs its own.
OWN_PORTS = {
    "ingest": ("BATCHGATE_INGEST_PORT",),
    "scheduler": ("BATCHGATE_SCHEDULER_PORT",),
    "results": ("BATCHGATE_RESULTS_PORT",),
    "executor": ("BATCHGATE_EXECUTOR_PORT",),
    "envoy": ("BATCHGATE_PORT", "BATCHGATE_ENVOY_ADMIN_PORT"),
    "simulator": ("BATCHGATE_SIMULATOR_PORT",),
}
EXTRA_SETTINGS_ENV = {"BATCHGATE_CONFIG"}  # read by load_settings itself: the YAML file's path


# --- reading -----------------------------------------------------------------------------------


@dataclass
class Variable:
    name: str
    has_default: bool


def interpolate(value: Any, environ: Mapping[str, str], seen: list[Variable]) -> Any:
    """Compose's variable substitution, applied to every string of the parsed file."""
    if isinstance(value, dict):
        return {k: interpolate(v, environ, seen) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, environ, seen) for v in value]
    if not isinstance(value, str):
        return value

    def substitute(match: re.Match[str]) -> str:
        if match.group("escaped"):
            return "$"
        if match.group("named"):
            seen.append(Variable(match.group("named"), False))
            return environ.get(match.group("named"), "")
        braced = BRACED.match(match.group("braced"))
        if braced is None:
            raise ValueError(f"invalid interpolation {match.group(0)!r}")
        name, op, arg = braced.group("name"), braced.group("op"), braced.group("arg") or ""
        seen.append(Variable(name, op in (":-", "-")))
        current, is_set = environ.get(name, ""), name in environ
        if op == ":-":
            return current or arg
        if op == "-":
            return current if is_set else arg
        if op in (":?", "?") and (not is_set or (op == ":?" and not current)):
            raise ValueError(f"required variable {name} is missing: {arg}")
        if op == ":+":
            return arg if current else ""
        if op == "+":
            return arg if is_set else ""
        return current

    return VARIABLE.sub(substitute, value)


def load(
    path: Path = COMPOSE_FILE, environ: Mapping[str, str] | None = None
) -> tuple[dict[str, Any], list[Variable]]:
    """The file with anchors merged and variables substituted (from `environ`, default none)."""
    seen: list[Variable] = []
    return interpolate(yaml.safe_load(path.read_text()), environ or {}, seen), seen


def duration_s(text: str) -> float:
    """A Compose duration ("10s", "1m30s", "500ms") in seconds."""
    if not DURATION.match(text):
        raise ValueError(f"{text!r} is not a duration")
    return sum(float(number) * DURATION_UNIT_S[unit] for number, unit in DURATION_PART.findall(text))


@dataclass
class Stage:
    image: str
    name: str = ""
    """`FROM image AS name`."""
    instructions: list[tuple[str, str]] = field(default_factory=list)
    """(INSTRUCTION, arguments), continuation lines joined."""

    def instruction(self, name: str) -> list[str]:
        return [arguments for instruction, arguments in self.instructions if instruction == name]


@dataclass
class Dockerfile:
    stages: list[Stage]
    args: dict[str, str] = field(default_factory=dict)
    """The build arguments declared before the first FROM, with their defaults."""

    @property
    def final(self) -> Stage:
        return self.stages[-1]

    @property
    def env(self) -> dict[str, str]:
        """The final stage's ENV: what every container starts with."""
        values: dict[str, str] = {}
        for arguments in self.final.instruction("ENV"):
            for pair in shlex.split(arguments):
                key, _, value = pair.partition("=")
                values[key] = value
        return values


def read_dockerfile(path: Path = DOCKERFILE) -> Dockerfile:
    """The file with each stage's base image as a build without --build-arg resolves it."""
    args: dict[str, str] = {}
    stages: list[Stage] = []

    def expand(text: str) -> str:
        return re.sub(r"\$\{(\w+)\}", lambda m: args.get(m.group(1), ""), text)

    for raw in re.sub(r"\\\n", " ", path.read_text()).splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        instruction, _, arguments = line.partition(" ")
        instruction, arguments = instruction.upper(), arguments.strip()
        if instruction == "ARG" and not stages:
            name, _, default = arguments.partition("=")
            args[name] = expand(default)
        elif instruction == "FROM":
            image, *alias = arguments.split()
            stages.append(Stage(expand(image), alias[1] if alias[:1] in (["AS"], ["as"]) else ""))
        else:
            stages[-1].instructions.append((instruction, arguments))
    return Dockerfile(stages, args)


# --- what each service is ----------------------------------------------------------------------


def is_batchgate(service: Mapping[str, Any]) -> bool:
    """Built from this repository's Dockerfile."""
    return "build" in service


def role(service: Mapping[str, Any]) -> str:
    """Which batchgate part a service runs, from its command ("" for other images)."""
    if not is_batchgate(service):
        return ""
    command = [str(part) for part in service.get("command") or [""]]
    if command[0] == "serve" and len(command) > 1:
        return command[1]
    return {"simulate": "simulator"}.get(command[0], command[0])


def environment(service: Mapping[str, Any], image_env: Mapping[str, str]) -> dict[str, str]:
    """What the container sees: the image's ENV (PATH aside), then the service's environment."""
    env = {k: v for k, v in image_env.items() if "$" not in v}
    declared = service.get("environment") or {}
    if isinstance(declared, list):
        declared = dict(item.partition("=")[::2] for item in declared)
    env.update({k: "" if v is None else str(v) for k, v in declared.items()})
    return env


def named_volumes(service: Mapping[str, Any]) -> dict[str, str]:
    """Container path → named volume, for the service's named-volume mounts."""
    mounts = {}
    for mount in service.get("volumes") or []:
        source, target = str(mount).split(":")[:2]
        if not source.startswith((".", "/")):
            mounts[target] = source
    return mounts


def healthcheck_argv(service: Mapping[str, Any]) -> list[str] | None:
    test = (service.get("healthcheck") or {}).get("test")
    if not test or test[0] == "NONE":
        return None
    if isinstance(test, str):
        return ["sh", "-c", test]
    if test[0] == "CMD-SHELL":
        return ["sh", "-c", test[1]]
    return [BATCHGATE_BIN if test[1] == "batchgate" else test[1], *test[2:]]


def standard_otel_variables() -> set[str]:
    """Every OTEL_* variable the OpenTelemetry SDK and API define."""
    from opentelemetry import environment_variables as api_env
    from opentelemetry.sdk import environment_variables as sdk_env

    names = set()
    for module in (api_env, sdk_env):
        names |= {v for k, v in vars(module).items() if k.startswith("OTEL_") and isinstance(v, str)}
    return names


# --- the rules ---------------------------------------------------------------------------------


def _compose_problems(compose: dict[str, Any]) -> list[str]:
    """The Compose specification's rules this file relies on."""
    problems = [
        f"unknown top-level key {k}" for k in compose if k not in TOP_LEVEL_KEYS and not k.startswith("x-")
    ]
    services: dict[str, Any] = compose.get("services") or {}
    volumes = set(compose.get("volumes") or {})
    for name, service in services.items():
        where = f"services.{name}"
        problems += [f"{where}: unknown key {k}" for k in service if k not in SERVICE_KEYS]
        if "image" not in service and "build" not in service:
            problems.append(f"{where}: neither image nor build")
        restart = str(service.get("restart", "no"))
        if restart.split(":")[0] not in RESTART_POLICIES:
            problems.append(f"{where}: restart {restart!r}")
        for other, spec in (service.get("depends_on") or {}).items():
            if other not in services:
                problems.append(f"{where}: depends on unknown service {other}")
                continue
            condition = spec.get("condition", "service_started")
            if condition not in CONDITIONS:
                problems.append(f"{where}: depends_on.{other} condition {condition!r}")
            if condition == "service_healthy" and healthcheck_argv(services[other]) is None:
                problems.append(f"{where}: waits for {other} to be healthy but it has no healthcheck")
            if services[other].get("profiles") and not service.get("profiles") and spec.get("required", True):
                problems.append(f"{where}: always started but depends on {other}, which is in a profile")
        check = service.get("healthcheck") or {}
        problems += [f"{where}.healthcheck: unknown key {k}" for k in check if k not in HEALTHCHECK_KEYS]
        test = check.get("test")
        if check and not (isinstance(test, str) or (test and test[0] in ("CMD", "CMD-SHELL", "NONE"))):
            problems.append(f"{where}.healthcheck.test must be a string or start with CMD/CMD-SHELL/NONE")
        for key in ("interval", "timeout", "start_period", "start_interval"):
            if key in check and not DURATION.match(str(check[key])):
                problems.append(f"{where}.healthcheck.{key}: {check[key]!r} is not a duration")
        if "stop_grace_period" in service and not DURATION.match(str(service["stop_grace_period"])):
            problems.append(f"{where}.stop_grace_period is not a duration")
        for mount in service.get("volumes") or []:
            source = str(mount).split(":")[0]
            if source.startswith((".", "/")):
                if not (ROOT / source).exists():
                    problems.append(f"{where}: bind mount source {source} does not exist")
            elif source not in volumes:
                problems.append(f"{where}: named volume {source} is not declared under volumes")
        for mapping in service.get("ports") or []:
            if not PORT_MAPPING.match(str(mapping)):
                problems.append(f"{where}: port mapping {mapping!r}")
        for entry in service.get("env_file") or []:
            if (
                isinstance(entry, dict)
                and entry.get("required", True)
                and not (ROOT / entry["path"]).exists()
            ):
                problems.append(f"{where}: env_file {entry['path']} is required but missing")
        for key, value in (service.get("environment") or {}).items():
            if isinstance(value, bool):
                problems.append(f"{where}.environment.{key}: quote booleans (they become strings)")
    return problems


def _batchgate_problems(compose: dict[str, Any], image_env: Mapping[str, str]) -> list[str]:
    """Consistency with batchgate itself: settings, CLI, ports, addresses, health checks."""
    problems: list[str] = []
    services: dict[str, Any] = compose["services"]
    known = {f.metadata["env"] for f in env_fields()} | EXTRA_SETTINGS_ENV
    otel = standard_otel_variables()
    parser = build_parser()
    by_role = {role(s): name for name, s in services.items() if is_batchgate(s)}
    for name, service in services.items():
        if not is_batchgate(service):
            continue
        where = f"services.{name}"
        env = environment(service, image_env)
        for key in env:
            if key.startswith("BATCHGATE_") and key not in known:
                problems.append(f"{where}: {key} is not a setting in services/common/config.py")
            elif key.startswith("OTEL_") and key not in otel:
                problems.append(f"{where}: {key} is not a standard OpenTelemetry variable")
            elif not key.startswith(("BATCHGATE_", "OTEL_", "PYTHON")):
                problems.append(f"{where}: {key} is neither a batchgate setting nor an OTEL_* variable")
        try:
            settings = load_settings(environ=env)
        except ValueError as exc:
            problems.append(f"{where}: the settings do not load: {exc}")
            continue
        command = [str(part) for part in service.get("command") or []]
        try:
            parser.parse_args(command)
        except SystemExit:
            problems.append(f"{where}: `batchgate {' '.join(command)}` is not a valid command")
            continue
        kind = role(service)
        if kind not in ROLES:
            problems.append(f"{where}: runs {command}, which is no batchgate service")
            continue
        for target in ("ingest", "scheduler", "results"):
            expected = [f"{by_role.get(target)}:{getattr(settings, f'{target}_port')}"]
            if settings.addrs(target) != expected:
                problems.append(f"{where}: {target} addresses {settings.addrs(target)}, expected {expected}")
        if settings.uses_simulator and settings.simulator_host != by_role.get("simulator"):
            problems.append(f"{where}: simulator host {settings.simulator_host!r} is no compose service")
        endpoint = env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "")
        otlp = HOST_PORT.search(endpoint)
        if endpoint and (otlp is None or otlp.group("host") not in services):
            problems.append(f"{where}: OTEL_EXPORTER_OTLP_ENDPOINT {endpoint!r} is no compose service")
        if kind in ONE_SHOT:
            if str(service.get("restart")) != "no":
                problems.append(f"{where}: a one-shot job must not restart")
        elif kind in LONG_RUNNING:
            check = (service.get("healthcheck") or {}).get("test") or []
            if list(check[:4]) != ["CMD", "batchgate", "health", kind]:
                problems.append(f"{where}: healthcheck should be `batchgate health {kind}`, not {check}")
        published = [PORT_MAPPING.match(str(p)) for p in service.get("ports") or []]
        if kind == "envoy" and [int(m.group("container")) for m in published if m] != [settings.port]:
            problems.append(f"{where}: must publish Envoy's port {settings.port}")
        if kind == "executor" and (published or "container_name" in service):
            problems.append(f"{where}: executors scale (--scale): no published port, no container_name")
        if kind in TLS_ROLES and not settings.insecure_internal:
            problems += _certificate_problems(where, service, services, settings.tls_dir)
    for service in services.values():
        for other, spec in (service.get("depends_on") or {}).items():
            one_shot = ONE_SHOT.get(role(services[other]))
            if one_shot and spec.get("condition") != "service_completed_successfully":
                problems.append(f"{other}: wait for {one_shot} to complete, not {spec.get('condition')}")
    return problems


def _certificate_problems(
    where: str, service: Mapping[str, Any], services: Mapping[str, Any], tls_dir: str
) -> list[str]:
    """A TLS service reads its certificates from the volume the `certs` job writes, after it ran."""
    writers = [name for name, s in services.items() if role(s) == "certs"]
    if not writers:
        return [f"{where}: no `certs` job creates the certificates it needs"]
    volume = named_volumes(service).get(tls_dir)
    if volume is None or named_volumes(services[writers[0]]).get(tls_dir) != volume:
        return [f"{where}: BATCHGATE_TLS_DIR {tls_dir!r} is not the volume the certs job writes"]
    if writers[0] not in (service.get("depends_on") or {}):
        return [f"{where}: does not wait for the certs job"]
    return []


def problems(compose: dict[str, Any], image_env: Mapping[str, str]) -> list[str]:
    return _compose_problems(compose) + _batchgate_problems(compose, image_env)


# --- what a deployment must do ------------------------------------------------------------------

SERVICES_WITH_TELEMETRY = {
    "batchgate-ingest",
    "batchgate-scheduler",
    "batchgate-results",
    "batchgate-executor",
}


def check_sdk_batch(base_url: str, key: str, prefix: str, count: int = 20) -> None:
    """The `openai` SDK's batch flow against a deployment: upload, create, poll until completed,
    download; every request answered by the model, in input order."""
    from openai import OpenAI

    client = OpenAI(base_url=base_url, api_key=key, max_retries=0)
    records = chat_records(count, prefix=prefix)
    batch = client.batches.create(
        input_file_id=upload(client, records).id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    done = wait_for_batch(client, batch.id, timeout_s=180)
    assert done.status == "completed", done
    assert done.request_counts.completed == count and done.request_counts.failed == 0
    lines = read_jsonl(client.files.content(done.output_file_id).content)
    assert [line["custom_id"] for line in lines] == [r["custom_id"] for r in records]
    for line, record in zip(lines, records, strict=True):
        assert line["error"] is None and line["response"]["status_code"] == 200, line
        answer = line["response"]["body"]["choices"][0]["message"]["content"]
        assert record["body"]["messages"][0]["content"] in answer


def wait_for_telemetry(sink: OtlpSink, timeout_s: float = 60) -> None:
    """Traces and metrics of every service reach the collector (`sink` stands in for it)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not (
        set(sink.services()) >= SERVICES_WITH_TELEMETRY
        and {p.service for p in sink.points()} >= SERVICES_WITH_TELEMETRY
    ):
        time.sleep(0.5)
    assert set(sink.services()) >= SERVICES_WITH_TELEMETRY, dict(sink.services())
    assert {p.service for p in sink.points()} >= SERVICES_WITH_TELEMETRY


# --- running -----------------------------------------------------------------------------------


@dataclass
class Topology:
    """The batchgate services of a compose file placed on this one host: which start, in which
    order, and with what environment. Every port the file names becomes a free local port (the
    same for every service that names it), a second replica gets ports of its own, and the
    test's database stands in for the `postgres` service."""

    compose: dict[str, Any]
    image_env: dict[str, str]
    database_url: str
    profiles: frozenset[str] = frozenset()
    scale: dict[str, int] = field(default_factory=dict)
    ports: dict[int, int] = field(default_factory=dict)
    """Port in the file → free local port (the same for every service that names it)."""

    def __post_init__(self) -> None:
        self.services: dict[str, Any] = self.compose["services"]
        for service in self.services.values():
            for value in environment(service, self.image_env).values():
                for match in HOST_PORT.finditer(value):
                    self.port(int(match.group("port")))
            for mapping in service.get("ports") or []:
                self.port(int(PORT_MAPPING.match(str(mapping)).group("container")))  # type: ignore[union-attr]

    def port(self, port: int) -> int:
        if port not in self.ports:
            self.ports[port] = free_port()
        return self.ports[port]

    def api_url(self) -> str:
        """Where a client reaches the API: the local port standing in for the one Envoy publishes."""
        envoy = next(s for s in self.services.values() if role(s) == "envoy")
        published = PORT_MAPPING.match(str(envoy["ports"][0]))
        assert published is not None, envoy["ports"]
        return f"http://127.0.0.1:{self.port(int(published.group('container')))}/v1"

    def collector_port(self) -> int:
        """The local port standing in for the collector's, where the services export telemetry."""
        service = next(s for s in self.services.values() if is_batchgate(s))
        endpoint = environment(service, self.image_env)["OTEL_EXPORTER_OTLP_ENDPOINT"]
        return self.port(int(endpoint.rsplit(":", 1)[1]))

    def active(self) -> list[str]:
        """Batchgate services to start, in depends_on order."""
        wanted = [
            name
            for name, s in self.services.items()
            if is_batchgate(s) and (not s.get("profiles") or set(s["profiles"]) & self.profiles)
        ]
        ordered: list[str] = []

        def visit(name: str) -> None:
            if name in ordered or name not in wanted:
                return
            for other in self.services[name].get("depends_on") or {}:
                visit(other)
            ordered.append(name)

        for name in wanted:
            visit(name)
        return ordered

    def environment(self, name: str, replica: int = 0) -> dict[str, str]:
        """The service's environment with hosts mapped to 127.0.0.1 and ports to local ones."""
        service = self.services[name]
        env = environment(service, self.image_env)
        for key, value in env.items():
            if key.startswith("BATCHGATE_") and key.endswith("_PORT") and value.isdigit():
                value = str(self.port(int(value)))
            value = HOST_PORT.sub(
                lambda m: (
                    f"127.0.0.1:{self.port(int(m.group('port')))}"
                    if m.group("host") in self.services
                    else m.group(0)
                ),
                value,
            )
            env[key] = "127.0.0.1" if value in self.services else value
        env["BATCHGATE_DATABASE_URL"] = self.database_url  # the CI server stands in for `postgres`
        if replica:
            assert role(service) == "executor", "only services nobody dials can scale on one host"
            env.update({key: str(free_port()) for key in OWN_PORTS[role(service)]})
        return env


@dataclass
class LocalCompose(Topology):
    """The batchgate services of a compose file as local processes (see the module docstring)."""

    tmp: Path = field(kw_only=True)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.stack = Stack(load_settings(environ={}), log_dir=self.tmp / "logs", inherit_settings=False)

    def environment(self, name: str, replica: int = 0) -> dict[str, str]:
        env = {key: self.local_path(name, value) for key, value in super().environment(name, replica).items()}
        env["BATCHGATE_DATA_DIR"] = str(self.tmp / f"{name}-{replica}")  # each container's own disk
        return env

    def local_path(self, name: str, value: str) -> str:
        """A path inside one of the service's named volumes → that volume's local directory
        (shared by every service that mounts it, as Docker shares the volume)."""
        for target, volume in named_volumes(self.services[name]).items():
            if value == target or value.startswith(target + "/"):
                return str(self.tmp / "volumes" / volume) + value[len(target) :]
        return value

    def argv(self, name: str, extra: list[str] | None = None) -> list[str]:
        command = [self.local_path(name, str(p)) for p in self.services[name]["command"]]
        return [BATCHGATE_BIN, *command, *(extra or [])]

    def run_once(self, name: str, command: list[str] | None = None, timeout_s: float = 120) -> str:
        """`docker compose run --rm NAME [COMMAND]`: returns stdout, fails on a non-zero exit."""
        argv = [BATCHGATE_BIN, *command] if command else self.argv(name)
        done = subprocess.run(
            argv,
            env=clean_environ(self.environment(name)),
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
        assert done.returncode == 0, f"{name} exited {done.returncode}: {done.stderr}"
        return done.stdout

    def wait_healthy(self, name: str, child: Child, env: dict[str, str], timeout_s: float = 120) -> None:
        argv = healthcheck_argv(self.services[name])
        if argv is None:
            return
        deadline = time.monotonic() + timeout_s
        while True:
            if child.process is not None and child.process.poll() is not None:
                raise RuntimeError(f"{child.name} exited {child.process.returncode} before it was healthy")
            probe = subprocess.run(argv, env=clean_environ(env), capture_output=True, timeout=60, check=False)
            if probe.returncode == 0:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{child.name} is not healthy: {probe.stderr.decode()}")
            time.sleep(0.5)

    @contextlib.contextmanager
    def running(self) -> Iterator[LocalCompose]:
        try:
            for name in self.active():
                service = self.services[name]
                if str(service.get("restart")) == "no":
                    self.run_once(name)
                    continue
                for replica in range(self.scale.get(name, 1)):
                    env = self.environment(name, replica)
                    child = self.stack.spawn(
                        Child(f"{name}-{replica}", self.argv(name), role=role(service), env=env)
                    )
                    self.wait_healthy(name, child, env)
            yield self
        except BaseException:
            for path in sorted((self.tmp / "logs").glob("*.log")):
                print(f"===== {path.name} =====\n{path.read_text(errors='replace')[-20000:]}")
            raise
        finally:
            self.stack.stop()
