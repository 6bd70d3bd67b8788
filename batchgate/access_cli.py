"""Operator verbs for who may do what: `batchgate keys …` and `batchgate projects …`.

They write the database directly (there is no keys REST API). A project's policy bounds every
key of it; a key's own policy only narrows it (`batchgate.services.common.access_policy`). Policy flags
(`--allow-models`, `--max-records`, `--max-concurrent`, `--expedited`, `--features`) are the
same on `create` and `set-policy`; `set-policy` changes only the flags it is given.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from batchgate import access_flags
from batchgate.admin_cli import settings_of, with_db
from batchgate.exit_codes import CommandError, ExitCode
from batchgate.guardrails_cli import add_guardrail_parser, guardrail_config
from batchgate.services.common.access_policy import ALL_SCOPES, Policy, Scope, parse_scopes, scopes_text

if TYPE_CHECKING:
    from batchgate.services.common.db import AnyRow, Database


def _stored_budget(budget: float | None) -> float | None:
    """A stored cap as listed: an infinite one (before `--budget inf` was refused) is none."""
    return budget if budget is None or math.isfinite(budget) else None


def _show_budget(budget: float | None) -> str:
    return "no budget" if budget is None else f"budget ${budget:g}"


def _expires_at(seconds: float | None) -> float | None:
    return None if seconds is None else time.time() + seconds


def _expiry(row: AnyRow) -> str:
    if row.expires_at is None:
        return "no expiry"
    state = "expired" if row.expires_at <= time.time() else "expires"
    return f"{state} {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(row.expires_at))}"


async def _project_or_exit(db: Database, name: str) -> str:
    from batchgate.services.common import auth

    project = await auth.find_project(db, name)
    if project is None:
        raise CommandError(ExitCode.NOT_FOUND, f"no project {name!r}")
    return project


def _key_state(row: AnyRow) -> str:
    """`revoked`, `expired` (its `--expires-in` has passed: every call answers 401) or `active`."""
    if row.revoked_at:
        return "revoked"
    return "expired" if row.expires_at is not None and row.expires_at <= time.time() else "active"


def _print_key(row: AnyRow, as_json: bool) -> None:
    state = _key_state(row)
    scopes = parse_scopes(row.scopes)
    policy = Policy.from_json(row.policy)
    if as_json:
        entry = {"id": row.id, "prefix": row.key_prefix, "project": row.project_name, "name": row.name}
        entry |= {"state": state, "created_at": row.created_at, "budget_usd": _stored_budget(row.budget_usd)}
        entry |= {
            "scopes": sorted(scopes),
            "expires_at": row.expires_at,
            "policy": json.loads(policy.to_json() or "{}"),
        }
        print(json.dumps(entry))
        return
    shown_scopes = "all scopes" if scopes == ALL_SCOPES else scopes_text(scopes) or "no scopes"
    print(
        f"{row.id}\t{row.key_prefix}…\t{row.project_name}\t{row.name}\t{state}\t"
        f"{_show_budget(_stored_budget(row.budget_usd))}\t{shown_scopes}\t{_expiry(row)}\t{policy.describe()}"
    )


def cmd_keys(args: argparse.Namespace) -> None:
    from batchgate.services.common import auth
    from batchgate.services.common.db import projects

    settings = settings_of(args)

    async def create(db: Database) -> None:
        name = args.project or auth.DEFAULT_PROJECT_NAME
        project = await auth.ensure_project(db, name)
        key = await auth.create_key(
            db,
            project,
            args.name,
            args.budget,
            policy=access_flags.apply_policy_flags(Policy(), args),
            scopes=getattr(args, "scopes", ALL_SCOPES),
            expires_at=_expires_at(getattr(args, "expires_in", None)),
        )
        print(key.secret)
        print(
            f"key {key.key_id} for project {name} ({project}); store the secret: it is not shown again",
            file=sys.stderr,
        )

    async def listing(db: Database) -> None:
        project = await _project_or_exit(db, args.project) if args.project else None
        async with db.read() as conn:
            rows = await projects.keys(conn, project)
        for row in rows:
            _print_key(row, args.json)

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
        print(f"key {args.key_id}: {_show_budget(args.budget)}")

    async def set_policy(db: Database) -> None:
        async with db.write() as conn:
            row = await projects.key_access(conn, args.key_id)
            if row is None:
                raise CommandError(ExitCode.NOT_FOUND, f"no key {args.key_id}")
            policy = access_flags.apply_policy_flags(Policy.from_json(row.policy), args)
            scopes = getattr(args, "scopes", parse_scopes(row.scopes))
            expires_at = _expires_at(args.expires_in) if hasattr(args, "expires_in") else row.expires_at
            await projects.set_key_access(
                conn,
                args.key_id,
                policy=policy.to_json(),
                scopes=None if scopes == ALL_SCOPES else scopes_text(scopes),
                expires_at=expires_at,
            )
        print(f"key {args.key_id}: {policy.describe()}")

    commands = {"create": create, "list": listing, "revoke": revoke, "set-budget": set_budget}
    commands["set-policy"] = set_policy
    asyncio.run(with_db(settings, commands[args.keys_command]))


def cmd_projects(args: argparse.Namespace) -> None:
    from batchgate.services.common import auth
    from batchgate.services.common.db import projects

    settings = settings_of(args)

    async def create(db: Database) -> None:
        project = await auth.ensure_project(db, args.name)
        if args.budget is not None:
            await auth.set_project_budget(db, project, args.budget)
        await set_policy_of(db, project)
        print(project)

    async def listing(db: Database) -> None:
        async with db.read() as conn:
            rows = await projects.all_projects(conn)
        for row in rows:
            policy = Policy.from_json(row.policy)
            print(
                f"{row.id}\t{row.name}\t{_show_budget(_stored_budget(row.budget_usd))}\t{policy.describe()}"
            )

    async def set_budget(db: Database) -> None:
        project = await _project_or_exit(db, args.project)
        await auth.set_project_budget(db, project, args.budget)
        print(f"project {args.project}: {_show_budget(args.budget)}")

    async def set_policy_of(db: Database, project: str) -> Policy:
        async with db.write() as conn:
            policy = access_flags.apply_policy_flags(
                Policy.from_json(await projects.project_policy(conn, project)), args
            )
            await projects.set_project_policy(conn, project, policy.to_json())
        return policy

    async def set_policy(db: Database) -> None:
        policy = await set_policy_of(db, await _project_or_exit(db, args.project))
        print(f"project {args.project}: {policy.describe()}")

    async def set_guardrails(db: Database) -> None:
        project = await _project_or_exit(db, args.project)
        config = None if args.off else guardrail_config(args)
        async with db.write() as conn:
            policy = replace(
                Policy.from_json(await projects.project_policy(conn, project)), guardrails=config
            )
            await projects.set_project_policy(conn, project, policy.to_json())
        print(f"project {args.project}: {config.describe() if config else 'no guardrails'}")

    commands = {"create": create, "list": listing, "set-budget": set_budget, "set-policy": set_policy}
    commands["set-guardrails"] = set_guardrails
    asyncio.run(with_db(settings, commands[args.projects_command]))


def add_commands(sub: Any) -> None:
    keys = sub.add_parser("keys", help="manage API keys (direct database access)")
    keys_sub = keys.add_subparsers(dest="keys_command", required=True)
    create = keys_sub.add_parser("create", help="create a key; prints the secret")
    create.add_argument("--project", help="project name, created if new (default: the default project)")
    create.add_argument("--name", default="cli")
    create.add_argument("--budget", type=access_flags.budget, default=None, help="spend cap in USD")
    key_access = keys_sub.add_parser("set-policy", help="change a key's policy, scopes or expiry")
    key_access.add_argument("key_id")
    for parser in (create, key_access):
        access_flags.policy_arguments(parser, project=False)
        parser.add_argument(
            "--scopes",
            type=access_flags.scopes,
            default=argparse.SUPPRESS,
            help=f"comma-separated: {', '.join(Scope)}; or all",
        )
        parser.add_argument(
            "--expires-in",
            dest="expires_in",
            type=access_flags.expires_in,
            default=argparse.SUPPRESS,
            help="e.g. 12h, 7d, never",
        )
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
    key_budget.add_argument("budget", type=access_flags.budget, help="USD, or none")
    keys.set_defaults(func=cmd_keys)

    projects_parser = sub.add_parser("projects", help="manage projects (direct database access)")
    projects_sub = projects_parser.add_subparsers(dest="projects_command", required=True)
    project_create = projects_sub.add_parser("create", help="create a project (if new); prints its id")
    project_create.add_argument("name")
    project_create.add_argument("--budget", type=access_flags.budget, default=None, help="spend cap in USD")
    projects_sub.add_parser("list", help="list projects")
    project_budget = projects_sub.add_parser(
        "set-budget", help="set a project's spend cap ('none' removes it)"
    )
    project_budget.add_argument("project", help="project name or id")
    project_budget.add_argument("budget", type=access_flags.budget, help="USD, or none")
    project_policy = projects_sub.add_parser("set-policy", help="change a project's policy")
    project_policy.add_argument("project", help="project name or id")
    for parser in (project_create, project_policy):
        access_flags.policy_arguments(parser, project=True)
    add_guardrail_parser(projects_sub)
    projects_parser.set_defaults(func=cmd_projects)
