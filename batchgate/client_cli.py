"""Client verbs: `batchgate batches …`, `batchgate files …` and `batchgate usage`, over REST through Envoy.

They talk to the gateway exactly as users' SDKs do (base URL and key from flags or
`BATCHGATE_BASE_URL` / `BATCHGATE_API_KEY`). Human-readable output by default, the API's own
JSON with `--json`; results go to stdout, progress and notes to stderr; exit codes follow
`batchgate.exit_codes`.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from batchgate import client_views as views
from batchgate.api_client import ApiClient, ApiFailure, save_to
from batchgate.client_commands import Handler, add_verb, common_options, runner
from batchgate.client_inputs import create_from_file, scratch_upload
from batchgate.exit_codes import CommandError, ExitCode
from batchgate.progress import ProgressDisplay
from batchgate.services.common.states import BATCH_TERMINAL, BatchStatus, ItemState, TemplateStatus

PRIORITIES = ("standard", "expedited")
RETRY_SELECTIONS = (ItemState.FAILED.value, ItemState.EXPIRED.value, ItemState.CANCELLED.value)

# --- output ---------------------------------------------------------------------------------------


def _show_rejections(
    payload: dict[str, Any], save_as: Path | None, api: ApiClient, *, dry_run: bool = False
) -> None:
    """Rejected-record previews to stderr; the full rejection file to `save_as` if asked (a dry
    run answers the previews only: it stores no rejection file)."""
    previews = payload.get("rejected_records") or []
    count = int(payload.get("rejected_count") or len(previews))
    if not count:
        return
    for record in previews:
        custom_id = record.get("custom_id")
        label = f" [{custom_id}]" if custom_id else ""
        views.note(
            f"  rejected line {record.get('line')}{label}: {record.get('code')}: {record.get('message')}"
        )
    file_id = payload.get("rejected_records_file_id")
    more = f", {count - len(previews)} more not shown" if count > len(previews) else ""
    if dry_run:
        views.note(f"{count} record(s) rejected{more}; a dry run stores no rejections file")
        return
    views.note(f"{count} record(s) rejected{more}; every rejection is in {file_id or 'the error file'}")
    if save_as is not None and file_id:
        save_to(save_as, lambda out: api.download_file(file_id, out))
        views.note(f"rejections saved to {save_as}")


# --- batches --------------------------------------------------------------------------------------


def _metadata(pairs: list[str]) -> dict[str, str]:
    metadata = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise CommandError(ExitCode.INVALID, f"--metadata wants key=value, got {pair!r}")
        metadata[key] = value
    return metadata


def _priority(text: str) -> str | int:
    if text in PRIORITIES:
        return text
    try:
        return int(text)
    except ValueError:
        raise CommandError(
            ExitCode.INVALID, f"--priority is standard, expedited or an integer, not {text!r}"
        ) from None


def _wait(api: ApiClient, batch: dict[str, Any], poll_s: float) -> dict[str, Any]:
    display = ProgressDisplay(sys.stderr, batch["id"])
    try:
        while batch["status"] not in BATCH_TERMINAL:
            display.update(batch)
            time.sleep(poll_s)
            batch = api.get_batch(batch["id"])
    except KeyboardInterrupt:
        views.note(f"\nstopped waiting; the batch goes on: batchgate batches get {batch['id']} --wait")
        raise
    display.finish(batch)
    return batch


def _download_outputs(api: ApiClient, batch: dict[str, Any], directory: Path) -> None:
    for field, suffix in (("output_file_id", "output"), ("error_file_id", "errors")):
        file_id = batch.get(field)
        if file_id:
            path = directory / f"{batch['id']}_{suffix}.jsonl"
            size = save_to(path, lambda out, file_id=file_id: api.download_file(file_id, out))
            views.note(f"{suffix:<7} {path} ({size} bytes)")


def _finished(api: ApiClient, batch: dict[str, Any], args: argparse.Namespace) -> ExitCode:
    """After --wait: fetch the files, report, and turn the final status into an exit code."""
    _download_outputs(api, batch, Path(args.output_dir))
    if args.json:
        views.print_json(batch)
    if batch["status"] == BatchStatus.COMPLETED:
        return ExitCode.OK
    errors = (batch.get("errors") or {}).get("data") or []
    reason = f": {errors[0].get('message')}" if errors else ""
    views.note(f"batch {batch['id']} ended {batch['status']}{reason}")
    return ExitCode.OTHER


def cmd_batches_create(args: argparse.Namespace, api: ApiClient) -> ExitCode:
    path = Path(args.input_file)
    if not path.is_file():
        raise CommandError(ExitCode.INVALID, f"no such input file: {path}")
    body: dict[str, Any] = {"completion_window": args.completion_window}
    body.update(
        {k: v for k, v in (("endpoint", args.endpoint), ("model", args.model), ("name", args.name)) if v}
    )
    if args.metadata:
        body["metadata"] = _metadata(args.metadata)
    if args.priority is not None:
        body["priority"] = _priority(args.priority)
    if args.cron or args.cron_timezone:
        if args.wait:
            raise CommandError(ExitCode.INVALID, "--wait follows a batch; a --cron template spawns many")
        body.update({k: v for k, v in (("cron", args.cron), ("cron_timezone", args.cron_timezone)) if v})
    if args.dry_run:
        return _dry_run(args, api, path, body)
    rejections_out = Path(args.rejections_out) if args.rejections_out else None
    try:
        batch = create_from_file(api, path, body, args.idempotency_key)
    except ApiFailure as failure:
        _show_rejections(failure.error, rejections_out, api)
        raise
    _show_rejections(batch, rejections_out, api)
    if not args.json:
        print(batch["id"], flush=True)
    if batch["status"] == TemplateStatus.SCHEDULED:
        views.note(f"template {batch['id']} scheduled: next run at {views.when(batch['next_run_at'])}")
        if args.json:
            views.print_json(batch)
        return ExitCode.OK
    views.note(f"batch {batch['id']} {batch['status']}: {batch['request_counts']['total']} request(s)")
    return _follow(args, api, batch)


def _follow(args: argparse.Namespace, api: ApiClient, batch: dict[str, Any]) -> ExitCode:
    """After a create or retry: with --wait, follow the new batch to its end and download."""
    if not args.wait:
        if args.json:
            views.print_json(batch)
        return ExitCode.OK
    return _finished(api, _wait(api, batch, args.poll_interval), args)


def _dry_run(args: argparse.Namespace, api: ApiClient, path: Path, body: dict[str, Any]) -> ExitCode:
    """The dry run of a create from the file, which is uploaded for it and deleted after: the
    server reads it as it reads a create's input (its bytes, its line numbers), so the
    rejections are the create's. Prints the would-be batch's summary and estimate."""
    try:
        with scratch_upload(api, path) as file_id:
            batch = api.create_batch({**body, "input_file_id": file_id, "dry_run": True})
    except ApiFailure as failure:
        _show_rejections(failure.error, None, api, dry_run=True)
        raise
    _show_rejections(batch, None, api, dry_run=True)
    views.show(args, batch, views.estimate_table)
    views.refused_hold(batch)
    return ExitCode.OK


def cmd_batches_retry(args: argparse.Namespace, api: ApiClient) -> ExitCode:
    batch = api.retry_batch(args.batch_id, args.only, args.model)
    if not args.json:
        print(batch["id"], flush=True)
        views.note(f"retry of {batch.get('retry_of')}: {batch['request_counts']['total']} request(s)")
    return _follow(args, api, batch)


def cmd_batches_get(args: argparse.Namespace, api: ApiClient) -> ExitCode:
    batch = api.get_batch(args.batch_id)
    if args.wait:
        return _finished(api, _wait(api, batch, args.poll_interval), args)
    return views.show(args, batch, views.describe_batch)


def cmd_batches_list(args: argparse.Namespace, api: ApiClient) -> ExitCode:
    return views.show(args, api.list_batches(limit=args.limit, after=args.after), views.batches_table)


def cmd_batches_cancel(args: argparse.Namespace, api: ApiClient) -> ExitCode:
    return views.show(args, api.cancel_batch(args.batch_id), lambda b: print(f"{b['id']} {b['status']}"))


def _download(args: argparse.Namespace, fetch: Callable[[Any], int]) -> ExitCode:
    """`fetch(stream)` into `-o FILE`, or to stdout."""
    if args.output:
        size = save_to(Path(args.output), fetch)
        views.note(f"wrote {size} bytes to {args.output}")
    else:
        fetch(sys.stdout.buffer)
        sys.stdout.buffer.flush()
    return ExitCode.OK


def cmd_batches_results(args: argparse.Namespace, api: ApiClient) -> ExitCode:
    result_format = "merged" if args.merged else "simple" if args.simple else None
    return _download(
        args, lambda out: api.download_results(args.batch_id, out, args.partial, args.state, result_format)
    )


# --- files ----------------------------------------------------------------------------------------


def cmd_files_upload(args: argparse.Namespace, api: ApiClient) -> ExitCode:
    path = Path(args.path)
    if not path.is_file():
        raise CommandError(ExitCode.INVALID, f"no such file: {path}")

    def human(file: dict[str, Any]) -> None:
        print(file["id"])
        views.note(f"uploaded {path} ({file['bytes']} bytes)")

    return views.show(args, api.upload_file(path, args.purpose), human)


def cmd_files_list(args: argparse.Namespace, api: ApiClient) -> ExitCode:
    page = api.list_files(purpose=args.purpose, limit=args.limit, after=args.after, order=args.order)
    return views.show(args, page, views.files_table)


def cmd_files_get(args: argparse.Namespace, api: ApiClient) -> ExitCode:
    return views.show(args, api.get_file(args.file_id), views.describe_file)


def cmd_files_download(args: argparse.Namespace, api: ApiClient) -> ExitCode:
    return _download(args, lambda out: api.download_file(args.file_id, out))


def cmd_files_delete(args: argparse.Namespace, api: ApiClient) -> ExitCode:
    return views.show(args, api.delete_file(args.file_id), lambda answer: print(f"deleted {answer['id']}"))


# --- usage ----------------------------------------------------------------------------------------


def cmd_usage(args: argparse.Namespace, api: ApiClient) -> ExitCode:
    page = api.usage(
        group_by=args.group_by,
        batch_id=args.batch_id,
        model=args.model,
        api_key_id=args.api_key_id,
        start_time=args.start_time,
        end_time=args.end_time,
    )
    return views.show(args, page, views.usage_table)


# --- wiring ---------------------------------------------------------------------------------------


def _wait_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--wait", action="store_true", help="show progress until the batch ends, then download"
    )
    parser.add_argument(
        "-o", "--output-dir", default=".", help="where --wait saves the output and error files (default .)"
    )
    parser.add_argument(
        "--poll-interval", type=float, default=1.0, help="seconds between status checks (default 1)"
    )


def add_commands(sub: Any) -> None:
    common = common_options()

    def verb(
        verbs: Any, name: str, handler: Handler, help: str, *positionals: str
    ) -> argparse.ArgumentParser:
        return add_verb(verbs, common, name, handler, help, *positionals)

    batches = sub.add_parser("batches", help="create, follow, list, cancel batches and fetch results")
    verbs = batches.add_subparsers(dest="batches_command", required=True)
    create = verb(verbs, "create", cmd_batches_create, "upload a JSONL file and create a batch")
    create.add_argument("--input-file", required=True, help="JSONL, one request per line")
    create.add_argument("--endpoint", help="e.g. /v1/chat/completions (the default with --model)")
    create.add_argument(
        "--model", help="the model every record must use (endpoint then defaults to chat completions)"
    )
    create.add_argument("--name", help="a name for people, shown in lists and the panel")
    create.add_argument("--completion-window", default="24h")
    create.add_argument("--priority", help="standard, expedited or an integer (higher runs first)")
    create.add_argument(
        "--metadata", action="append", default=[], metavar="KEY=VALUE", help="repeat for several pairs"
    )
    create.add_argument("--idempotency-key", help="a retry with the same key returns the same batch")
    create.add_argument("--rejections-out", metavar="FILE", help="save every rejected record (JSONL) here")
    create.add_argument(
        "--cron", help='a recurring batch: a run at each time of this 5-field expression ("0 2 * * *")'
    )
    create.add_argument("--cron-timezone", help="IANA time zone of --cron (default UTC)")
    create.add_argument(
        "--dry-run", action="store_true", help="check and estimate tokens and cost; store nothing"
    )
    _wait_options(create)
    _wait_options(verb(verbs, "get", cmd_batches_get, "show one batch", "batch_id"))
    listing = verb(verbs, "list", cmd_batches_list, "list batches, newest first")
    listing.add_argument("--limit", type=int, help="1..100 (default 20)")
    listing.add_argument("--after", help="page after this batch id")
    verb(verbs, "cancel", cmd_batches_cancel, "cancel a batch (finished items are kept)", "batch_id")
    retry = verb(
        verbs, "retry", cmd_batches_retry, "run an ended batch's unsuccessful items again", "batch_id"
    )
    retry.add_argument(
        "--only", choices=RETRY_SELECTIONS, help="only items that ended so (default: all three)"
    )
    retry.add_argument("--model", help="another model (public alias) for every retried request")
    _wait_options(retry)
    results = verb(
        verbs, "results", cmd_batches_results, "stream a batch's per-item results (JSONL)", "batch_id"
    )
    results.add_argument("--partial", action="store_true", help="what is finished so far, while it runs")
    results.add_argument(
        "--state", choices=(ItemState.SUCCEEDED.value, ItemState.FAILED.value), help="only these outcomes"
    )
    shape = results.add_mutually_exclusive_group()
    shape.add_argument(
        "--merged",
        action="store_true",
        help="each line with the request's custom_id and body beside its outcome",
    )
    shape.add_argument(
        "--simple", action="store_true", help='one {"custom_id", "content" or "error"} per line'
    )
    results.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")

    files = sub.add_parser("files", help="upload, list, inspect, download and delete files")
    verbs = files.add_subparsers(dest="files_command", required=True)
    upload = verb(verbs, "upload", cmd_files_upload, "upload a file; prints its id", "path")
    upload.add_argument("--purpose", default="batch")
    listing = verb(verbs, "list", cmd_files_list, "list files")
    listing.add_argument("--purpose", help="only this purpose (batch, batch_output)")
    listing.add_argument("--limit", type=int)
    listing.add_argument("--after", help="page after this file id")
    listing.add_argument("--order", choices=("asc", "desc"))
    verb(verbs, "get", cmd_files_get, "show one file's metadata", "file_id")
    download = verb(verbs, "download", cmd_files_download, "download a file's content", "file_id")
    download.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")
    verb(verbs, "delete", cmd_files_delete, "delete a file", "file_id")

    usage = sub.add_parser("usage", parents=[common], help="tokens and cost of your project's requests")
    usage.add_argument("--group-by", help="comma-separated: batch_id, model, api_key_id")
    usage.add_argument("--batch-id", help="only this batch")
    usage.add_argument("--model", help="only requests this model answered")
    usage.add_argument("--api-key-id", help="only requests made with this key")
    usage.add_argument("--start-time", type=int, help="unix seconds, inclusive")
    usage.add_argument("--end-time", type=int, help="unix seconds, exclusive")
    usage.set_defaults(func=runner(cmd_usage))
