"""Operator verbs for webhook secrets and certificates: `batchgate webhooks` and `certs`
(`keys` and `projects` are `batchgate.access_cli`), and the two helpers every server-side verb
uses.

Heavy modules (the database) are imported inside the verbs, so that every `batchgate` command
starts quickly.
"""

from __future__ import annotations

import argparse
import asyncio
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
    """`webhooks` and `certs` (`keys` and `projects`: `access_cli.add_commands`)."""
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
