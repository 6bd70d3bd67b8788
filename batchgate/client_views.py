"""How the client verbs print: notes on stderr, the API's JSON (`--json`), or tables and
descriptions for people (`batchgate.client_cli`)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from batchgate.exit_codes import CommandError, ExitCode

HOLD_FITS = "fits"
"""A dry run's `estimate.hold_verdict` when the create's budget hold would be admitted now."""


def note(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, ensure_ascii=False))


def show(
    args: argparse.Namespace, answer: dict[str, Any], human: Callable[[dict[str, Any]], None]
) -> ExitCode:
    """The API's answer as JSON with --json, else as `human` renders it."""
    if args.json:
        print_json(answer)
    else:
        human(answer)
    return ExitCode.OK


def refused_hold(answer: dict[str, Any]) -> None:
    """After a dry run's answer is shown: a dry run answers 200 even when its create would not
    be admitted (`estimate.hold_verdict` other than `fits`); the command then fails as that
    create would, so that a script checking the exit code does not go on to a create that
    fails. Every such refusal is a 402 (a budget) or a 429 (open batches), both exit 1
    (`ExitCode.for_http_status`)."""
    estimate = answer.get("estimate") or {}
    verdict = estimate.get("hold_verdict")
    if verdict and verdict != HOLD_FITS:
        raise CommandError(
            ExitCode.OTHER, f"a create would be refused ({verdict}): {estimate.get('hold_message', '')}"
        )


def when(stamp: Any) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(stamp)) if stamp else "-"


def table(headers: tuple[str, ...], rows: Sequence[Sequence[str]]) -> None:
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    for row in (headers, *rows):
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())


def counts(batch: dict[str, Any]) -> str:
    c = batch.get("request_counts") or {}
    return f"{c.get('completed', 0)}/{c.get('failed', 0)}/{c.get('total', 0)}"


def describe_batch(batch: dict[str, Any]) -> None:
    counts = batch.get("request_counts") or {}
    lines = [
        f"{batch['id']}  {batch['status']}" + (f"  {batch['name']}" if batch.get("name") else ""),
        f"  endpoint   {batch.get('endpoint')}  (model {batch.get('model') or '-'})",
        f"  requests   {counts.get('total', 0)} total, {counts.get('completed', 0)} completed, "
        f"{counts.get('failed', 0)} failed ({batch.get('rejected_count', 0)} rejected at create)",
        f"  created    {when(batch.get('created_at'))}, expires {when(batch.get('expires_at'))}",
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
    """The retry links of a batch, as lines of `describe_batch`."""
    lines = [f"  retry of   {batch['retry_of']}"] if batch.get("retry_of") else []
    if batch.get("retries"):
        lines.append(f"  retried as {', '.join(batch['retries'])}")
    return lines


def estimate_table(batch: dict[str, Any]) -> None:
    """A dry run's would-be batch and estimate (`batches create --dry-run`)."""
    estimate = batch.get("estimate") or {}
    currency = estimate.get("currency", "")
    rows = [
        ("records", f"{batch['request_counts']['total']} ({batch.get('rejected_count', 0)} rejected)"),
        ("model", batch.get("model") or "-"),
        ("input tokens", f"{estimate.get('input_tokens', 0)} ({estimate.get('tokenizer', '')})"),
        ("max output tokens", str(estimate.get("max_output_tokens", 0))),
        ("cost", f"{estimate.get('cost_min', 0):.6f} to {estimate.get('cost_max', 0):.6f} {currency}"),
        ("budget hold", f"{estimate.get('hold_usd', 0):.6f} usd ({estimate.get('hold_verdict', '-')})"),
    ]
    table(("DRY RUN", "NOTHING WAS STORED"), rows)


def describe_file(file: dict[str, Any]) -> None:
    print(
        f"{file['id']}  {file.get('filename')}\n"
        f"  purpose    {file.get('purpose')}\n"
        f"  bytes      {file.get('bytes')}\n"
        f"  created    {when(file.get('created_at'))}, expires {when(file.get('expires_at'))}"
    )


def batches_table(page: dict[str, Any]) -> None:
    rows = [
        (
            b["id"],
            b.get("name") or "-",
            b["status"],
            b.get("endpoint", ""),
            counts(b),
            when(b.get("created_at")),
        )
        for b in page["data"]
    ]
    table(("ID", "NAME", "STATUS", "ENDPOINT", "OK/FAILED/TOTAL", "CREATED"), rows)
    if page.get("has_more"):
        note(f"more: batchgate batches list --after {page['last_id']}")


def files_table(page: dict[str, Any]) -> None:
    rows = [
        (
            f["id"],
            f.get("purpose", ""),
            str(f.get("bytes", "")),
            when(f.get("created_at")),
            f.get("filename", ""),
        )
        for f in page["data"]
    ]
    table(("ID", "PURPOSE", "BYTES", "CREATED", "FILENAME"), rows)


def usage_table(page: dict[str, Any]) -> None:
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
    table(headers, rows)
