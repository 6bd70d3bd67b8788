"""`batchgate templates …`: recurring batch templates over the REST API.

A template is made by `batchgate batches create … --cron EXPR`; these verbs list, show,
reschedule, pause, resume and delete them (`GET|POST|DELETE /v1/batch_templates…`).
"""

from __future__ import annotations

import argparse
from typing import Any

from batchgate import client_views as views
from batchgate.api_client import ApiClient
from batchgate.client_commands import Handler, add_verb, common_options
from batchgate.exit_codes import CommandError, ExitCode


def _describe(template: dict[str, Any]) -> None:
    reason = f" ({template['paused_reason']})" if template.get("paused_reason") else ""
    print(f"{template['id']}  {template['status']}{reason}")
    print(f"  cron       {template['cron']} ({template['cron_timezone']})")
    print(f"  next run   {views.when(template.get('next_run_at'))}")
    print(f"  input      {template['input_file_id']} -> {template['endpoint']}")
    print(f"  last run   {views.when(template.get('last_run_at'))}")
    if template.get("last_error"):
        print(f"  last error {template['last_error']['code']}: {template['last_error']['message']}")
    for run in template.get("recent_runs") or []:
        print(f"  run        {run['id']}  {run['status']}  {views.when(run.get('created_at'))}")


def _listing(page: dict[str, Any]) -> None:
    rows: list[tuple[str, ...]] = [
        (
            str(t["id"]),
            str(t["status"]),
            f"{t['cron']} ({t['cron_timezone']})",
            views.when(t.get("next_run_at")),
        )
        for t in page["data"]
    ]
    views.table(("ID", "STATUS", "CRON", "NEXT RUN"), rows)


def cmd_list(args: argparse.Namespace, api: ApiClient) -> ExitCode:
    return views.show(args, api.list_templates(limit=args.limit, after=args.after), _listing)


def cmd_get(args: argparse.Namespace, api: ApiClient) -> ExitCode:
    return views.show(args, api.get_template(args.template_id), _describe)


def cmd_update(args: argparse.Namespace, api: ApiClient) -> ExitCode:
    given = (
        ("cron", args.cron),
        ("cron_timezone", args.cron_timezone),
        ("input_file_id", args.input_file_id),
    )
    body = {k: v for k, v in given if v}
    if not body:
        raise CommandError(ExitCode.INVALID, "give --cron, --cron-timezone or --input-file-id")
    return views.show(args, api.update_template(args.template_id, body), _describe)


def cmd_pause(args: argparse.Namespace, api: ApiClient) -> ExitCode:
    return views.show(args, api.template_action(args.template_id, "pause"), _describe)


def cmd_resume(args: argparse.Namespace, api: ApiClient) -> ExitCode:
    return views.show(args, api.template_action(args.template_id, "resume"), _describe)


def cmd_delete(args: argparse.Namespace, api: ApiClient) -> ExitCode:
    return views.show(args, api.delete_template(args.template_id), lambda t: print(f"{t['id']} deleted"))


def add_commands(sub: Any) -> None:
    common = common_options()
    templates = sub.add_parser("templates", help="recurring batches: list, show, pause, resume, delete")
    verbs = templates.add_subparsers(dest="templates_command", required=True)

    def verb(name: str, handler: Handler, help: str, with_id: bool = True) -> argparse.ArgumentParser:
        return add_verb(verbs, common, name, handler, help, *(("template_id",) if with_id else ()))

    listing = verb("list", cmd_list, "list templates, newest first", with_id=False)
    listing.add_argument("--limit", type=int, help="1..100 (default 20)")
    listing.add_argument("--after", help="page after this template id")
    verb("get", cmd_get, "show a template, its next run, last error and recent runs")
    update = verb("update", cmd_update, "change the cron expression, its time zone or the input file")
    update.add_argument("--cron", help="new 5-field expression")
    update.add_argument("--cron-timezone", help="new IANA time zone")
    update.add_argument("--input-file-id", help="an uploaded purpose=batch file for the runs to come")
    verb("pause", cmd_pause, "stop spawning runs")
    verb("resume", cmd_resume, "spawn runs again, from the next time after now")
    verb("delete", cmd_delete, "delete the template (runs already created go on)")
