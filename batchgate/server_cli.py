"""Operator verbs that run the stack: `up`, `serve`, `migrate`, `simulate`, `envoy`,
`envoy-config`, `health` (`keys` and `projects` are `batchgate.access_cli`, `webhooks` and
`certs` are `batchgate.admin_cli`).

Heavy modules (database, gRPC servers, the simulator) are imported inside the verbs that use
them, so that every `batchgate` command, the client verbs and the health probe included,
starts quickly.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from batchgate import access_cli
from batchgate import admin_cli as admin
from batchgate.exit_codes import CommandError, ExitCode
from batchgate.services.common.config import Settings
from batchgate.services.common.loading import load_settings

if TYPE_CHECKING:
    from batchgate.services.common.db import Database
    from batchgate.services.common.grpc_server import ServiceHost

SERVICES = ("ingest", "scheduler", "results", "executor")
UP_FLAGS = {
    "port": "BATCHGATE_PORT",
    "data_dir": "BATCHGATE_DATA_DIR",
    "executors": "BATCHGATE_EXECUTORS",
    "database_url": "BATCHGATE_DATABASE_URL",
}


# --- serve -------------------------------------------------------------------------------------


async def _serve(settings: Settings, services: list[str], index: int) -> None:
    from batchgate.services.common import auth, collector, telemetry
    from batchgate.services.common.db import Database
    from batchgate.services.common.grpc_server import run_hosts

    hosts: list[ServiceHost] = []
    db: Database | None = None
    core = [s for s in services if s != "executor"]
    if core:
        from batchgate.services.ingest import server as ingest_server
        from batchgate.services.results import server as results_server
        from batchgate.services.scheduler import server as scheduler_server

        builders = {
            "ingest": ingest_server.build,
            "scheduler": scheduler_server.build,
            "results": results_server.build,
        }
        db = Database(
            settings.resolved_database_url,
            writer_cache_mib=settings.sqlite_writer_cache_mib,
            reader_cache_mib=settings.sqlite_reader_cache_mib,
        )
        hosts += [builders[name](settings, db) for name in core]
    if "executor" in services:
        from batchgate.services.executor import server as executor_server

        hosts.append(executor_server.build(settings, port=settings.executor_port + index))
    verifier = auth.KeyVerifier(db, settings.auth_cache_s) if db is not None else None
    collector.freeze_startup_objects()
    try:
        await run_hosts(hosts, settings, verifier)
    finally:
        if db is not None:
            await db.dispose()
        telemetry.shutdown()


def cmd_serve(args: argparse.Namespace) -> None:
    import uvloop

    from batchgate.services.common import allocator, faults, logs, telemetry, tls

    allocator.limit_arenas()  # before the service's threads start
    settings = admin.settings_of(args)
    name = "+".join(args.services)
    upstream_keys = [key for provider in settings.providers for key in provider.api_keys]
    logs.setup(name, settings.log_level, settings.log_format, secrets=upstream_keys)
    faults.configure(settings.crash_at)
    telemetry.setup(args.services, settings, args.index)
    try:
        uvloop.run(_serve(settings, args.services, args.index))
    except tls.MissingMaterial as exc:
        raise CommandError(ExitCode.INVALID, str(exc)) from None


# --- migrate / keys ------------------------------------------------------------------------------


def cmd_migrate(args: argparse.Namespace) -> None:
    settings = admin.settings_of(args)

    async def done(_db: Database) -> None:
        print(f"database at the newest schema: {settings.resolved_database_url}")

    asyncio.run(admin.with_db(settings, done))


# --- certs -----------------------------------------------------------------------------------------


# --- simulate / envoy-config ---------------------------------------------------------------------


def cmd_simulate(args: argparse.Namespace) -> None:
    import uvloop

    from batchgate.services.common import logs
    from batchgate.simulator import SimulatorOptions
    from batchgate.simulator import serve as serve_simulator

    settings = admin.settings_of(args)
    logs.setup("simulator", settings.log_level, settings.log_format)
    options = SimulatorOptions(
        latency_ms=settings.simulator_latency_ms if args.latency_ms is None else args.latency_ms,
        error_rate=args.error_rate,
        rate_limit_rate=args.rate_limit_rate,
        seed=args.seed,
    )
    port = args.port or settings.simulator_port
    host = args.host or settings.host

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        print(f"simulated upstream on http://{host}:{port}/v1", file=sys.stderr, flush=True)
        await serve_simulator(host, port, options, stop)

    uvloop.run(main())


def cmd_envoy_config(args: argparse.Namespace) -> None:
    from batchgate.gateway.render import write_config
    from batchgate.services.common import tls

    try:
        path = write_config(admin.settings_of(args), Path(args.out))
    except tls.MissingMaterial as exc:
        raise CommandError(ExitCode.INVALID, str(exc)) from None
    print(path)


def cmd_envoy(args: argparse.Namespace) -> None:
    """Render the config into the data directory and become Envoy (containers run this)."""
    from batchgate.gateway import launcher as envoy_launcher
    from batchgate.services.common import tls

    settings = admin.settings_of(args)
    if settings.insecure_internal:
        print(f"warning: {tls.INSECURE_WARNING}", file=sys.stderr)
    try:
        argv = envoy_launcher.command(settings, Path(settings.data_dir) / "envoy.yaml")
    except tls.MissingMaterial as exc:
        raise CommandError(ExitCode.INVALID, str(exc)) from None
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(argv[0], argv)


# --- health ----------------------------------------------------------------------------------------


def cmd_health(args: argparse.Namespace) -> None:
    from batchgate import health
    from batchgate.services.common import tls

    settings = admin.settings_of(args)
    try:
        address = health.describe(settings, args.target, args.index)
    except ValueError as exc:
        raise CommandError(ExitCode.INVALID, str(exc)) from None
    try:
        ready = health.check(settings, args.target, args.index, args.timeout, args.service)
    except (ValueError, tls.MissingMaterial) as exc:
        raise CommandError(ExitCode.INVALID, str(exc)) from None
    if not ready:
        raise CommandError(ExitCode.OTHER, f"{args.target} ({address}) is not ready")
    if not args.quiet:
        print(f"{args.target} ({address}) is ready")


# --- up --------------------------------------------------------------------------------------------


def cmd_up(args: argparse.Namespace) -> None:
    from batchgate.launcher import Stack, StartError, check_ports
    from batchgate.services.common import auth, logs

    overrides = {
        env: str(getattr(args, flag)) for flag, env in UP_FLAGS.items() if getattr(args, flag) is not None
    }
    if args.config:
        overrides["BATCHGATE_CONFIG"] = str(Path(args.config).resolve())
    os.environ.update(overrides)
    settings = load_settings()
    logs.setup("up", settings.log_level, settings.log_format)  # its lines as the services' are
    log = logging.getLogger("batchgate.up")
    try:
        check_ports(settings)
    except StartError as exc:
        raise CommandError(ExitCode.OTHER, str(exc)) from None
    Path(settings.data_dir).mkdir(parents=True, exist_ok=True)
    issued = admin.ensure_certs(settings)
    if issued:
        print(f"created the cluster CA and certificates ({', '.join(issued)}) for internal mutual TLS")

    async def first_key(db: Database) -> str:
        project = await auth.ensure_project(db)
        return (await auth.create_key(db, project, name=f"up-{int(time.time())}")).secret

    secret = asyncio.run(admin.with_db(settings, first_key))
    stack = Stack(settings, env=overrides)
    stopping = False

    def on_signal(_sig: int, _frame: Any) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        stack.start_all()
        try:
            stack.wait_ready()
        except StartError as exc:
            raise CommandError(ExitCode.OTHER, f"{exc}: see its output above") from None
        upstream = (
            f"simulated upstream on :{settings.simulator_port}"
            if settings.uses_simulator
            else f"{len(settings.providers)} configured provider(s)"
        )
        from batchgate.gateway import panel

        web_panel = f"{settings.base_url}/ui/" if panel.assets() is not None else "not installed (run `make`)"
        print(
            f"\nbatchgate is up ({settings.executors} executor(s), {upstream}, "
            f"database {settings.resolved_database_url})\n"
            f"  base URL : {settings.base_url}/v1\n"
            f"  API key  : {secret}\n"
            f"  web panel: {web_panel}\n"
            f"  try      : OPENAI_BASE_URL={settings.base_url}/v1 OPENAI_API_KEY={secret} "
            "python your_script.py\n"
            f"Ctrl-C stops everything.\n",
            flush=True,
        )
        restarts = Restarts()
        while not stopping:
            for child in [] if stopping else stack.dead_children():  # Ctrl-C reaches them too
                code = child.process.returncode if child.process is not None else None
                if not restarts.allow(child.name, time.monotonic()):
                    log.error("%s exited unexpectedly (code %s), again; stopping", child.name, code)
                    sys.exit(1)
                log.error("%s exited unexpectedly (code %s); starting it again", child.name, code)
                stack.restart(child)
            time.sleep(0.5)
    finally:
        log.info("stopping…")
        stack.stop()


class Restarts:
    """`up` starts a process that died again (its work is not lost: the stack's own recovery
    takes over, README "A dead process costs seconds"), unless it died `MAX_RESTARTS` times
    within `WINDOW_S`: then it cannot run (a port taken, a broken config) and the stack stops."""

    MAX_RESTARTS = 5
    WINDOW_S = 60.0

    def __init__(self) -> None:
        self._times: dict[str, list[float]] = {}

    def allow(self, name: str, now: float) -> bool:
        recent = [t for t in self._times.get(name, []) if now - t < self.WINDOW_S]
        self._times[name] = [*recent, now]
        return len(recent) < self.MAX_RESTARTS


def add_commands(sub: Any) -> None:
    up = sub.add_parser("up", help="start the whole stack (SQLite, Envoy, services, simulator)")
    up.add_argument("--port", type=int, help="Envoy's port (REST and gRPC)")
    up.add_argument("--data-dir", dest="data_dir")
    up.add_argument("--executors", type=int)
    up.add_argument("--database-url", dest="database_url")
    up.set_defaults(func=cmd_up)

    serve = sub.add_parser("serve", help="run one or more services in this process")
    serve.add_argument("services", nargs="+", choices=SERVICES)
    serve.add_argument(
        "--index", type=int, default=0, help="executor number (its port is executor_port+index)"
    )
    serve.set_defaults(func=cmd_serve)

    sub.add_parser("migrate", help="apply database migrations").set_defaults(func=cmd_migrate)

    access_cli.add_commands(sub)
    admin.add_commands(sub)

    simulate = sub.add_parser("simulate", help="run the simulated LLM upstream")
    simulate.add_argument("--host", help="address to bind (default: BATCHGATE_HOST)")
    simulate.add_argument("--port", type=int)
    simulate.add_argument("--latency-ms", dest="latency_ms", type=float)
    simulate.add_argument("--error-rate", dest="error_rate", type=float, default=0.0)
    simulate.add_argument("--rate-limit-rate", dest="rate_limit_rate", type=float, default=0.0)
    simulate.add_argument("--seed", type=int, default=0)
    simulate.set_defaults(func=cmd_simulate)

    envoy_config = sub.add_parser("envoy-config", help="write Envoy's config for the current settings")
    envoy_config.add_argument("--out", default="envoy.yaml")
    envoy_config.set_defaults(func=cmd_envoy_config)

    envoy = sub.add_parser("envoy", help="write Envoy's config into the data directory and run Envoy")
    envoy.set_defaults(func=cmd_envoy)

    health = sub.add_parser("health", help="exit 0 when a local service is ready (container health checks)")
    health.add_argument(
        "target", help="ingest, scheduler, results, executor, envoy, simulator, or host:port (gRPC)"
    )
    health.add_argument("--index", type=int, default=0, help="executor number (as for `serve`)")
    health.add_argument("--timeout", type=float, default=3.0, help="seconds")
    health.add_argument(
        "--service", help="for a host:port target: the service there (the identity its certificate names)"
    )
    health.add_argument("-q", "--quiet", action="store_true")
    health.set_defaults(func=cmd_health)
