"""Operator verbs: `up`, `serve`, `migrate`, `keys`/`projects` (`access_cli`), `certs`,
`simulate`, `envoy`, `envoy-config`, `health`.

They run on the servers' side: `keys` writes the database directly (there is no keys REST API).
Heavy modules (database, gRPC servers, the simulator) are imported inside the verbs that use
them, so that every `batchgate` command, the client verbs and the health probe included,
starts quickly.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from batchgate.exit_codes import CommandError, ExitCode
from services.common.config import Settings
from services.common.loading import load_settings

if TYPE_CHECKING:
    from services.common.db import Database
    from services.common.grpc_server import ServiceHost

SERVICES = ("ingest", "scheduler", "results", "executor")
UP_FLAGS = {
    "port": "BATCHGATE_PORT",
    "data_dir": "BATCHGATE_DATA_DIR",
    "executors": "BATCHGATE_EXECUTORS",
    "database_url": "BATCHGATE_DATABASE_URL",
}


def _settings(args: argparse.Namespace) -> Settings:
    return load_settings(getattr(args, "config", None))


# --- serve -------------------------------------------------------------------------------------


async def _serve(settings: Settings, services: list[str], index: int) -> None:
    from services.common import auth, telemetry
    from services.common.db import Database
    from services.common.grpc_server import run_hosts

    hosts: list[ServiceHost] = []
    db: Database | None = None
    core = [s for s in services if s != "executor"]
    if core:
        from services.ingest import server as ingest_server
        from services.results import server as results_server
        from services.scheduler import server as scheduler_server

        builders = {
            "ingest": ingest_server.build,
            "scheduler": scheduler_server.build,
            "results": results_server.build,
        }
        db = Database(settings.resolved_database_url)
        hosts += [builders[name](settings, db) for name in core]
    if "executor" in services:
        from services.executor import server as executor_server

        hosts.append(executor_server.build(settings, port=settings.executor_port + index))
    verifier = auth.KeyVerifier(db, settings.auth_cache_s) if db is not None else None
    try:
        await run_hosts(hosts, settings, verifier)
    finally:
        if db is not None:
            await db.dispose()
        telemetry.shutdown()


def cmd_serve(args: argparse.Namespace) -> None:
    import uvloop

    from services.common import faults, logs, telemetry, tls

    settings = _settings(args)
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


async def _with_db(settings: Settings, action: Any) -> Any:
    from services.common.db import Database
    from services.common.db.migrate import migrate

    db = Database(settings.resolved_database_url)
    try:
        await migrate(db)
        return await action(db)
    finally:
        await db.dispose()


def cmd_migrate(args: argparse.Namespace) -> None:
    settings = _settings(args)

    async def done(_db: Database) -> None:
        print(f"database at the newest schema: {settings.resolved_database_url}")

    asyncio.run(_with_db(settings, done))


def cmd_webhooks(args: argparse.Namespace) -> None:
    from services.common import auth

    settings = _settings(args)
    project = args.project or auth.DEFAULT_PROJECT_NAME

    async def secret(db: Database) -> None:
        value = await auth.webhook_secret(db, project, rotate=args.rotate)
        if value is None:
            raise CommandError(ExitCode.NOT_FOUND, f"no project {project}")
        print(value)
        if args.rotate:
            print(
                f"rotated: webhooks of project {project} are signed with this secret now",
                file=sys.stderr,
            )

    asyncio.run(_with_db(settings, secret))


# --- certs -----------------------------------------------------------------------------------------


def _cert_dir(settings: Settings, args: argparse.Namespace) -> Any:
    from batchgate.certs import CertDir
    from services.common import tls

    return CertDir.at(args.dir or tls.tls_dir(settings), args.ca_key)


def ensure_certs(settings: Settings) -> list[str]:
    """The cluster CA and every identity's certificate in the TLS directory, created when
    missing (`batchgate up` runs this: the embedded stack is authenticated with no setup
    step). Returns the identities issued now. Nothing when internal TLS is off or the settings
    point at the operator's own files."""
    from batchgate.certs import CertDir
    from services.common import tls

    if settings.insecure_internal or settings.tls_ca_file or settings.tls_cert_file or settings.tls_key_file:
        return []
    return [issued.name for issued in CertDir.at(tls.tls_dir(settings)).ensure()]


def cmd_certs(args: argparse.Namespace) -> None:
    from batchgate.certs import IDENTITIES, check_name

    certs = _cert_dir(_settings(args), args)
    try:
        if args.certs_command == "init":
            created = certs.init_ca()
            issued = certs.ensure()
            print(f"CA {'created' if created else 'kept'}: {certs.ca_cert} (key {certs.ca_key})")
            for cert in issued:
                print(f"issued {cert.name}: {cert.cert}")
            if not issued:
                print(f"every identity has a certificate in {certs.path}")
        elif args.certs_command == "issue":
            names = IDENTITIES if args.service == "all" else [args.service]
            for name in names:
                check_name(name)
            for name in names:
                cert = certs.issue(name, args.days)
                print(f"issued {cert.name}: {cert.cert} and {cert.key}")
        elif args.action == "begin":
            certs.begin_ca_rotation()
            print(
                f"new CA in {certs.ca_key}; {certs.ca_cert} trusts the old and the new one. Next: "
                "wait until every process reloaded it, then `batchgate certs issue --service all`"
            )
        else:
            certs.finish_ca_rotation()
            print(f"{certs.ca_cert} trusts only the new CA now")
    except (FileNotFoundError, ValueError) as exc:
        raise CommandError(ExitCode.INVALID, str(exc)) from None


# --- simulate / envoy-config ---------------------------------------------------------------------


def cmd_simulate(args: argparse.Namespace) -> None:
    import uvloop

    from batchgate.simulator import SimulatorOptions
    from batchgate.simulator import serve as serve_simulator
    from services.common import logs

    settings = _settings(args)
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
    from gateway.render import write_config
    from services.common import tls

    try:
        path = write_config(_settings(args), Path(args.out))
    except tls.MissingMaterial as exc:
        raise CommandError(ExitCode.INVALID, str(exc)) from None
    print(path)


def cmd_envoy(args: argparse.Namespace) -> None:
    """Render the config into the data directory and become Envoy (containers run this)."""
    from gateway import launcher as envoy_launcher
    from services.common import tls

    settings = _settings(args)
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
    from services.common import tls

    settings = _settings(args)
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
    from batchgate.launcher import Stack
    from services.common import auth

    overrides = {
        env: str(getattr(args, flag)) for flag, env in UP_FLAGS.items() if getattr(args, flag) is not None
    }
    if args.config:
        overrides["BATCHGATE_CONFIG"] = str(Path(args.config).resolve())
    os.environ.update(overrides)
    settings = load_settings()
    Path(settings.data_dir).mkdir(parents=True, exist_ok=True)
    issued = ensure_certs(settings)
    if issued:
        print(f"created the cluster CA and certificates ({', '.join(issued)}) for internal mutual TLS")

    async def first_key(db: Database) -> str:
        project = await auth.ensure_project(db)
        return (await auth.create_key(db, project, name=f"up-{int(time.time())}")).secret

    secret = asyncio.run(_with_db(settings, first_key))
    stack = Stack(settings, env=overrides)
    stopping = False

    def on_signal(_sig: int, _frame: Any) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        stack.start_all()
        stack.wait_ready()
        upstream = (
            f"simulated upstream on :{settings.simulator_port}"
            if settings.uses_simulator
            else f"{len(settings.providers)} configured provider(s)"
        )
        from gateway import panel

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
        while not stopping:
            dead = stack.dead_children()
            if dead:
                print(f"{', '.join(c.name for c in dead)} exited unexpectedly; stopping", file=sys.stderr)
                sys.exit(1)
            time.sleep(0.5)
    finally:
        print("stopping…", file=sys.stderr, flush=True)
        stack.stop()


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

    from batchgate import access_cli

    access_cli.add_commands(sub)

    webhooks = sub.add_parser("webhooks", help="webhook signing secrets (direct database access)")
    webhooks_sub = webhooks.add_subparsers(dest="webhooks_command", required=True)
    secret = webhooks_sub.add_parser("secret", help="print a project's webhook signing secret")
    secret.add_argument("--project", help="project name (default: the default project)")
    secret.add_argument("--rotate", action="store_true", help="replace it with a new one first")
    webhooks.set_defaults(func=cmd_webhooks)

    certs = sub.add_parser("certs", help="the cluster CA and certificates for internal mutual TLS")
    certs_sub = certs.add_subparsers(dest="certs_command", required=True)
    certs_init = certs_sub.add_parser(
        "init", help="create the CA and a certificate per identity (keeps what exists)"
    )
    certs_issue = certs_sub.add_parser("issue", help="(re)issue an identity's certificate from the CA")
    certs_issue.add_argument(
        "--service",
        required=True,
        help="identity: ingest, scheduler, results, executor, envoy, operator, or all",
    )
    certs_issue.add_argument("--days", type=int, default=365, help="validity (default 365)")
    rotate = certs_sub.add_parser("rotate-ca", help="replace the CA without downtime (two steps)")
    rotate.add_argument(
        "action", choices=("begin", "finish"), help="begin: new CA, trust both; finish: trust only the new"
    )
    for verb in (certs_init, certs_issue, rotate):
        verb.add_argument(
            "--dir", help="certificate directory (default: BATCHGATE_TLS_DIR, <data dir>/certs)"
        )
        verb.add_argument("--ca-key", dest="ca_key", help="the CA's key (default: <dir>/ca.key)")
    certs.set_defaults(func=cmd_certs)

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
