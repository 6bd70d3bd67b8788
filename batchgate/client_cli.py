"""Client verbs: `batchgate batches …`, `batchgate files …` and `batchgate usage`, over REST through Envoy.

They talk to the gateway exactly as users' SDKs do (base URL and key from flags or
`BATCHGATE_BASE_URL` / `BATCHGATE_API_KEY`). Human-readable output by default, the API's own
JSON with `--json`; results go to stdout, progress and notes to stderr; exit codes follow
`batchgate.exit_codes`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from batchgate.api_client import ApiClient, ApiFailure, save_to
from batchgate.exit_codes import CommandError, ExitCode
from batchgate.progress import ProgressDisplay
from services.common.loading import load_settings
from services.common.states import BATCH_TERMINAL, BatchStatus, ItemState

BASE_URL_ENV = "BATCHGATE_BASE_URL"
API_KEY_ENV = "BATCHGATE_API_KEY"
PRIORITIES = ("standard", "expedited")
RETRY_SELECTIONS = (ItemState.FAILED.value, ItemState.EXPIRED.value, ItemState.CANCELLED.value)

Handler = Callable[[argparse.Namespace, ApiClient], ExitCode]


# --- output ---------------------------------------------------------------------------------------


def _note(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, ensure_ascii=False))


def _show(
    args: argparse.Namespace, answer: dict[str, Any], human: Callable[[dict[str, Any]], None]
) -> ExitCode:
    """The API's answer as JSON with --json, else as `human` renders it."""
    if args.json:
        _print_json(answer)
    else:
        human(answer)
    return ExitCode.OK


def _when(stamp: Any) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(stamp)) if stamp else "-"


def _table(headers: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> None:
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    for row in (headers, *rows):
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())


def _counts(batch: dict[str, Any]) -> str:
    c = batch.get("request_counts") or {}
    return f"{c.get('completed', 0)}/{c.get('failed', 0)}/{c.get('total', 0)}"


def _describe_batch(batch: dict[str, Any]) -> None:
    counts = batch.get("request_counts") or {}
    lines = [
        f"{batch['id']}  {batch['status']}" + (f"  {batch['name']}" if batch.get("name") else ""),
        f"  endpoint   {batch.get('endpoint')}  (model {batch.get('model') or '-'})",
        f"  requests   {counts.get('total', 0)} total, {counts.get('completed', 0)} completed, "
        f"{counts.get('failed', 0)} failed ({batch.get('rejected_count', 0)} rejected at create)",
        f"  created    {_when(batch.get('created_at'))}, expires {_when(batch.get('expires_at'))}",
        f"  input      {batch.get('input_file_id')}",
        f"  output     {batch.get('output_file_id') or '-'}",
        f"  errors     {batch.get('error_file_id') or '-'}",
    ]
    if batch.get("metadata"):
        lines.append(f"  metadata   {json.dumps(batch['metadata'], ensure_ascii=False)}")
    lines.extend(_lineage(batch))
    pace = batch.get("throughput")
    if pace:
        eta = f"{pace['eta_s']} s left" if pace.get("eta_s") is not None else "no estimate yet"
        lines.append(f"  pace       {pace['items_per_s']} items/s, {pace['tokens_per_s']} tokens/s ({eta})")
    usage = batch.get("usage") or {}
    if usage.get("total_tokens"):
        lines.append(f"  tokens     {usage.get('input_tokens')} in, {usage.get('output_tokens')} out")
    cost = batch.get("cost") or {}
    if cost.get("amount"):
        lines.append(f"  cost       {cost['amount']:.6f} {cost.get('currency', '')}")
    print("\n".join(lines))


def _lineage(batch: dict[str, Any]) -> list[str]:
    """The retry links of a batch, as lines of `_describe_batch`."""
    lines = [f"  retry of   {batch['retry_of']}"] if batch.get("retry_of") else []
    if batch.get("retries"):
        lines.append(f"  retried as {', '.join(batch['retries'])}")
    return lines


def _describe_file(file: dict[str, Any]) -> None:
    print(
        f"{file['id']}  {file.get('filename')}\n"
        f"  purpose    {file.get('purpose')}\n"
        f"  bytes      {file.get('bytes')}\n"
        f"  created    {_when(file.get('created_at'))}, expires {_when(file.get('expires_at'))}"
    )


def _show_rejections(payload: dict[str, Any], save_as: Path | None, api: ApiClient) -> None:
    """Rejected-record previews to stderr; the full rejection file to `save_as` if asked."""
    previews = payload.get("rejected_records") or []
    count = int(payload.get("rejected_count") or len(previews))
    if not count:
        return
    for record in previews:
        custom_id = record.get("custom_id")
        label = f" [{custom_id}]" if custom_id else ""
        _note(f"  rejected line {record.get('line')}{label}: {record.get('code')}: {record.get('message')}")
    file_id = payload.get("rejected_records_file_id")
    more = f", {count - len(previews)} more not shown" if count > len(previews) else ""
    _note(f"{count} record(s) rejected{more}; every rejection is in {file_id or 'the error file'}")
    if save_as is not None and file_id:
        save_to(save_as, lambda out: api.download_file(file_id, out))
        _note(f"rejections saved to {save_as}")


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
        _note(f"\nstopped waiting; the batch goes on: batchgate batches get {batch['id']} --wait")
        raise
    display.finish(batch)
    return batch


def _download_outputs(api: ApiClient, batch: dict[str, Any], directory: Path) -> None:
    for field, suffix in (("output_file_id", "output"), ("error_file_id", "errors")):
        file_id = batch.get(field)
        if file_id:
            path = directory / f"{batch['id']}_{suffix}.jsonl"
            size = save_to(path, lambda out, file_id=file_id: api.download_file(file_id, out))
            _note(f"{suffix:<7} {path} ({size} bytes)")


def _finished(api: ApiClient, batch: dict[str, Any], args: argparse.Namespace) -> ExitCode:
    """After --wait: fetch the files, report, and turn the final status into an exit code."""
    _download_outputs(api, batch, Path(args.output_dir))
    if args.json:
        _print_json(batch)
    if batch["status"] == BatchStatus.COMPLETED:
        return ExitCode.OK
    errors = (batch.get("errors") or {}).get("data") or []
    reason = f": {errors[0].get('message')}" if errors else ""
    _note(f"batch {batch['id']} ended {batch['status']}{reason}")
    return ExitCode.OTHER


def _follow(args: argparse.Namespace, api: ApiClient, batch: dict[str, Any]) -> ExitCode:
    """After a create or retry: with --wait, follow the new batch to its end and download."""
    if not args.wait:
        if args.json:
            _print_json(batch)
        return ExitCode.OK
    return _finished(api, _wait(api, batch, args.poll_interval), args)


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
    if args.dry_run:
        return _dry_run(args, api, path, body)
    rejections_out = Path(args.rejections_out) if args.rejections_out else None
    uploaded = api.upload_file(path)
    _note(f"uploaded {path} as {uploaded['id']} ({uploaded['bytes']} bytes)")
    body["input_file_id"] = uploaded["id"]
    try:
        batch = api.create_batch(body, args.idempotency_key)
    except ApiFailure as failure:
        _show_rejections(failure.error, rejections_out, api)
        raise
    _show_rejections(batch, rejections_out, api)
    if not args.json:
        print(batch["id"], flush=True)
    _note(f"batch {batch['id']} {batch['status']}: {batch['request_counts']['total']} request(s)")
    return _follow(args, api, batch)


def _record_or_text(line: str) -> Any:
    """A JSONL line's value; a line that is not JSON goes as its text, for the server to reject."""
    try:
        return json.loads(line)
    except json.JSONDecodeError:
        return line


def _dry_run(args: argparse.Namespace, api: ApiClient, path: Path, body: dict[str, Any]) -> ExitCode:
    """Send the file's records inline with `dry_run` (so not even the upload is stored) and
    print the would-be batch's summary and estimate."""
    body["dry_run"] = True
    lines = path.read_text(encoding="utf-8-sig").split("\n")
    body["requests"] = [_record_or_text(line) for line in lines if line.strip()]
    try:
        batch = api.create_batch(body)
    except ApiFailure as failure:
        _show_rejections(failure.error, None, api)
        raise
    _show_rejections(batch, None, api)
    if args.json:
        _print_json(batch)
        return ExitCode.OK
    estimate = batch.get("estimate") or {}
    currency = estimate.get("currency", "")
    rows = [
        ("records", f"{batch['request_counts']['total']} ({batch.get('rejected_count', 0)} rejected)"),
        ("model", batch.get("model") or "-"),
        ("input tokens", f"{estimate.get('input_tokens', 0)} ({estimate.get('tokenizer', '')})"),
        ("max output tokens", str(estimate.get("max_output_tokens", 0))),
        ("cost", f"{estimate.get('cost_min', 0):.6f} to {estimate.get('cost_max', 0):.6f} {currency}"),
    ]
    _table(("DRY RUN", "NOTHING WAS STORED"), rows)
    return ExitCode.OK


def cmd_batches_get(args: argparse.Namespace, api: ApiClient) -> ExitCode:
    batch = api.get_batch(args.batch_id)
    if args.wait:
        return _finished(api, _wait(api, batch, args.poll_interval), args)
    return _show(args, batch, _describe_batch)


def _batches_table(page: dict[str, Any]) -> None:
    rows = [
        (
            b["id"],
            b.get("name") or "-",
            b["status"],
            b.get("endpoint", ""),
            _counts(b),
            _when(b.get("created_at")),
        )
        for b in page["data"]
    ]
    _table(("ID", "NAME", "STATUS", "ENDPOINT", "OK/FAILED/TOTAL", "CREATED"), rows)
    if page.get("has_more"):
        _note(f"more: batchgate batches list --after {page['last_id']}")


def cmd_batches_list(args: argparse.Namespace, api: ApiClient) -> ExitCode:
    return _show(args, api.list_batches(limit=args.limit, after=args.after), _batches_table)


def cmd_batches_cancel(args: argparse.Namespace, api: ApiClient) -> ExitCode:
    return _show(args, api.cancel_batch(args.batch_id), lambda b: print(f"{b['id']} {b['status']}"))


def cmd_batches_retry(args: argparse.Namespace, api: ApiClient) -> ExitCode:
    batch = api.retry_batch(args.batch_id, args.only, args.model)
    if not args.json:
        print(batch["id"], flush=True)
        _note(f"retry of {batch.get('retry_of')}: {batch['request_counts']['total']} request(s)")
    return _follow(args, api, batch)


def _download(args: argparse.Namespace, fetch: Callable[[Any], int]) -> ExitCode:
    """`fetch(stream)` into `-o FILE`, or to stdout."""
    if args.output:
        size = save_to(Path(args.output), fetch)
        _note(f"wrote {size} bytes to {args.output}")
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
        _note(f"uploaded {path} ({file['bytes']} bytes)")

    return _show(args, api.upload_file(path, args.purpose), human)


def _files_table(page: dict[str, Any]) -> None:
    rows = [
        (
            f["id"],
            f.get("purpose", ""),
            str(f.get("bytes", "")),
            _when(f.get("created_at")),
            f.get("filename", ""),
        )
        for f in page["data"]
    ]
    _table(("ID", "PURPOSE", "BYTES", "CREATED", "FILENAME"), rows)


def cmd_files_list(args: argparse.Namespace, api: ApiClient) -> ExitCode:
    page = api.list_files(purpose=args.purpose, limit=args.limit, after=args.after, order=args.order)
    return _show(args, page, _files_table)


def cmd_files_get(args: argparse.Namespace, api: ApiClient) -> ExitCode:
    return _show(args, api.get_file(args.file_id), _describe_file)


def cmd_files_download(args: argparse.Namespace, api: ApiClient) -> ExitCode:
    return _download(args, lambda out: api.download_file(args.file_id, out))


def cmd_files_delete(args: argparse.Namespace, api: ApiClient) -> ExitCode:
    return _show(args, api.delete_file(args.file_id), lambda answer: print(f"deleted {answer['id']}"))


# --- usage ----------------------------------------------------------------------------------------


def _usage_table(page: dict[str, Any]) -> None:
    keys = [k for k in ("batch_id", "model", "api_key_id") if any(g.get(k) for g in page["data"])]
    rows = [
        (
            *(g.get(k) or "-" for k in keys),
            str(g["requests"]),
            str(g["input_tokens"]),
            str(g["output_tokens"]),
            str(g["total_tokens"]),
            f"{g['cost']['amount']:.6f}",
        )
        for g in page["data"]
    ]
    headers = (*(k.upper() for k in keys), "REQUESTS", "INPUT", "OUTPUT", "TOTAL", "COST USD")
    _table(headers, rows)


def cmd_usage(args: argparse.Namespace, api: ApiClient) -> ExitCode:
    page = api.usage(
        group_by=args.group_by,
        batch_id=args.batch_id,
        model=args.model,
        api_key_id=args.api_key_id,
        start_time=args.start_time,
        end_time=args.end_time,
    )
    return _show(args, page, _usage_table)


# --- wiring ---------------------------------------------------------------------------------------


def _client(args: argparse.Namespace) -> ApiClient:
    base_url = args.base_url or os.environ.get(BASE_URL_ENV) or f"{load_settings(args.config).base_url}/v1"
    api_key = args.api_key or os.environ.get(API_KEY_ENV)
    if not api_key:
        raise CommandError(
            ExitCode.INVALID,
            f"no API key: pass --api-key or set {API_KEY_ENV} (an operator creates one with "
            "`batchgate keys create`)",
        )
    return ApiClient(base_url, api_key, args.timeout)


def _runner(handler: Handler) -> Callable[[argparse.Namespace], None]:
    def run(args: argparse.Namespace) -> None:
        with _client(args) as api:
            code = handler(args, api)
        if code != ExitCode.OK:
            sys.exit(int(code))

    return run


def _common_options() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--base-url", help=f"REST base URL with /v1 (default: ${BASE_URL_ENV}, else this host's gateway)"
    )
    common.add_argument("--api-key", help=f"API key (default: ${API_KEY_ENV})")
    common.add_argument("--json", action="store_true", help="print the API's JSON answer (for scripts)")
    common.add_argument("--timeout", type=float, default=60.0, help="seconds per HTTP call (default 60)")
    return common


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
    common = _common_options()

    def verb(
        verbs: Any, name: str, handler: Handler, help: str, *positionals: str
    ) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = verbs.add_parser(name, parents=[common], help=help)
        for positional in positionals:
            parser.add_argument(positional)
        parser.set_defaults(func=_runner(handler))
        return parser

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
    usage.set_defaults(func=_runner(cmd_usage))
