"""Operator verbs over the database itself: `batchgate keys`, `projects` and `webhooks`
(there is no REST API for keys or projects), and the two helpers every server-side verb uses.

Heavy modules (the database) are imported inside the verbs, so that every `batchgate` command
starts quickly.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import TYPE_CHECKING, Any

from batchgate.exit_codes import CommandError, ExitCode
from batchgate.services.common.config import Settings
from batchgate.services.common.loading import load_settings

if TYPE_CHECKING:
    from batchgate.services.common.db import Database


def settings_of(args: argparse.Namespace) -> Settings:
    return load_settings(getattr(args, "config", None))


async def with_db(settings: Settings, action: Any) -> Any:
    from batchgate.services.common.db import Database
    from batchgate.services.common.db.migrate import migrate

    db = Database(settings.resolved_database_url)
    try:
        await migrate(db)
        return await action(db)
    finally:
        await db.dispose()


def budget(value: str) -> float | None:
    """A `--budget` value: USD (0 or more), or `none` for no cap."""
    if value.lower() == "none":
        return None
    budget = float(value)
    if not budget >= 0:
        raise argparse.ArgumentTypeError("a budget is a USD amount of 0 or more, or 'none'")
    return budget


def show_budget(budget: float | None) -> str:
    return "no budget" if budget is None else f"budget ${budget:g}"


async def project_or_exit(db: Database, name: str) -> str:
    from batchgate.services.common import auth

    project = await auth.find_project(db, name)
    if project is None:
        raise CommandError(ExitCode.NOT_FOUND, f"no project {name!r}")
    return project


def cmd_keys(args: argparse.Namespace) -> None:
    from batchgate.services.common import auth
    from batchgate.services.common.db import projects

    settings = settings_of(args)

    async def create(db: Database) -> None:
        name = args.project or auth.DEFAULT_PROJECT_NAME
        project = await auth.ensure_project(db, name)
        key = await auth.create_key(db, project, args.name, args.budget)
        print(key.secret)
        print(
            f"key {key.key_id} for project {name} ({project}); store the secret: it is not shown again",
            file=sys.stderr,
        )

    async def listing(db: Database) -> None:
        project = await project_or_exit(db, args.project) if args.project else None
        async with db.read() as conn:
            rows = await projects.keys(conn, project)
        for row in rows:
            state = "revoked" if row.revoked_at else "active"
            if args.json:
                entry = {"id": row.id, "prefix": row.key_prefix, "project": row.project_name}
                print(
                    json.dumps(
                        {
                            **entry,
                            "name": row.name,
                            "state": state,
                            "created_at": row.created_at,
                            "budget_usd": row.budget_usd,
                        }
                    )
                )
            else:
                print(
                    f"{row.id}\t{row.key_prefix}…\t{row.project_name}\t{row.name}\t{state}\t"
                    f"{show_budget(row.budget_usd)}"
                )

    async def revoke(db: Database) -> None:
        if not await auth.revoke_key(db, args.key_id):
            async with db.read() as conn:
                known = await projects.key_exists(conn, args.key_id)
            if not known:
                raise CommandError(ExitCode.NOT_FOUND, f"no key {args.key_id}")
            raise CommandError(ExitCode.CONFLICT, f"key {args.key_id} is already revoked")
        if not args.no_wait and settings.auth_cache_s > 0:
            # Servers cache a verified key this long: once we return, no server accepts it.
            print(
                f"revoked {args.key_id}; waiting {settings.auth_cache_s:g} s for server caches",
                file=sys.stderr,
            )
            await asyncio.sleep(settings.auth_cache_s)
        print(f"revoked {args.key_id}")

    async def set_budget(db: Database) -> None:
        if not await auth.set_key_budget(db, args.key_id, args.budget):
            raise CommandError(ExitCode.NOT_FOUND, f"no key {args.key_id}")
        print(f"key {args.key_id}: {show_budget(args.budget)}")

    commands = {"create": create, "list": listing, "revoke": revoke, "set-budget": set_budget}
    asyncio.run(with_db(settings, commands[args.keys_command]))


def cmd_projects(args: argparse.Namespace) -> None:
    from batchgate.services.common import auth
    from batchgate.services.common.db import projects

    settings = settings_of(args)

    async def create(db: Database) -> None:
        project = await auth.ensure_project(db, args.name)
        if args.budget is not None:
            await auth.set_project_budget(db, project, args.budget)
        print(project)

    async def listing(db: Database) -> None:
        async with db.read() as conn:
            rows = await projects.all_projects(conn)
        for row in rows:
            print(f"{row.id}\t{row.name}\t{show_budget(row.budget_usd)}")

    async def set_budget(db: Database) -> None:
        project = await project_or_exit(db, args.project)
        await auth.set_project_budget(db, project, args.budget)
        print(f"project {args.project}: {show_budget(args.budget)}")

    asyncio.run(
        with_db(
            settings, {"create": create, "list": listing, "set-budget": set_budget}[args.projects_command]
        )
    )


def cmd_webhooks(args: argparse.Namespace) -> None:
    from batchgate.services.common import auth

    settings = settings_of(args)
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

    asyncio.run(with_db(settings, secret))


def cert_dir(settings: Settings, args: argparse.Namespace) -> Any:
    from batchgate.certs import CertDir
    from batchgate.services.common import tls

    return CertDir.at(args.dir or tls.tls_dir(settings), args.ca_key)


def ensure_certs(settings: Settings) -> list[str]:
    """The cluster CA and every identity's certificate in the TLS directory, created when
    missing (`batchgate up` runs this: the embedded stack is authenticated with no setup
    step). Returns the identities issued now. Nothing when internal TLS is off or the settings
    point at the operator's own files."""
    from batchgate.certs import CertDir
    from batchgate.services.common import tls

    if settings.insecure_internal or settings.tls_ca_file or settings.tls_cert_file or settings.tls_key_file:
        return []
    return [issued.name for issued in CertDir.at(tls.tls_dir(settings)).ensure()]


def cmd_certs(args: argparse.Namespace) -> None:
    from batchgate.certs import check_name
    from batchgate.services.common.authz import IDENTITIES

    certs = cert_dir(settings_of(args), args)
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


def add_commands(sub: Any) -> None:
    """`keys`, `webhooks`, `projects` and `certs`."""
    keys = sub.add_parser("keys", help="manage API keys (direct database access)")
    keys_sub = keys.add_subparsers(dest="keys_command", required=True)
    create = keys_sub.add_parser("create", help="create a key; prints the secret")
    create.add_argument("--project", help="project name, created if new (default: the default project)")
    create.add_argument("--name", default="cli")
    create.add_argument("--budget", type=budget, default=None, help="spend cap in USD")
    listing = keys_sub.add_parser("list", help="list keys")
    listing.add_argument("--project", help="only this project's keys (name or id)")
    listing.add_argument("--json", action="store_true", help="one JSON object per key")
    revoke = keys_sub.add_parser("revoke", help="revoke a key; returns once no server accepts it")
    revoke.add_argument("key_id")
    revoke.add_argument(
        "--no-wait", action="store_true", help="return at once (servers may accept it for auth_cache_s)"
    )
    key_budget = keys_sub.add_parser("set-budget", help="set a key's spend cap ('none' removes it)")
    key_budget.add_argument("key_id")
    key_budget.add_argument("budget", type=budget, help="USD, or none")
    keys.set_defaults(func=cmd_keys)

    webhooks = sub.add_parser("webhooks", help="webhook signing secrets (direct database access)")
    webhooks_sub = webhooks.add_subparsers(dest="webhooks_command", required=True)
    secret = webhooks_sub.add_parser("secret", help="print a project's webhook signing secret")
    secret.add_argument("--project", help="project name (default: the default project)")
    secret.add_argument("--rotate", action="store_true", help="replace it with a new one first")
    webhooks.set_defaults(func=cmd_webhooks)

    projects_parser = sub.add_parser("projects", help="manage projects (direct database access)")
    projects_sub = projects_parser.add_subparsers(dest="projects_command", required=True)
    project_create = projects_sub.add_parser("create", help="create a project (if new); prints its id")
    project_create.add_argument("name")
    project_create.add_argument("--budget", type=budget, default=None, help="spend cap in USD")
    projects_sub.add_parser("list", help="list projects")
    project_budget = projects_sub.add_parser(
        "set-budget", help="set a project's spend cap ('none' removes it)"
    )
    project_budget.add_argument("project", help="project name or id")
    project_budget.add_argument("budget", type=budget, help="USD, or none")
    projects_parser.set_defaults(func=cmd_projects)

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
