"""`batchgate projects set-guardrails`: its flags, and the guardrail settings they describe
(`batchgate.services.common.guardrail_config`; the chain itself runs in ingest at create)."""

from __future__ import annotations

import argparse
from typing import Any

from batchgate.exit_codes import CommandError, ExitCode
from batchgate.services.common.guardrail_config import GuardrailConfig, PiiKind
from batchgate.services.common.webhook_urls import RefusedUrl, split_url

MODERATION_TUNING = {"--moderation-fail": "moderation_fail", "--moderation-timeout": "moderation_timeout"}
"""The flags that tune the moderation hook (flag → argparse dest). They default to None, not
to their values, so that a call can tell they were given without --moderation-url."""
NO_FILTER = (
    "name the filters the project should have (they replace its current ones: --block-keywords, "
    "--block-regex, --redact, --moderation-url), or --off to turn them off"
)


def _block_pattern(value: str) -> tuple[str, str]:
    name, sep, expression = value.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError("NAME=REGEX")
    return name, expression


def guardrail_config(args: argparse.Namespace) -> GuardrailConfig:
    """The guardrails `set-guardrails` describes (replacing the project's whole set).

    A call that names no filter is refused rather than read as "no filters": it replaced the
    whole set with nothing, so e.g. `--moderation-fail closed` alone dropped the project's
    blocking and redaction without a word. Turning them off is `--off`."""
    try:
        redact = frozenset(PiiKind(k.strip()) for k in (args.redact or "").split(",") if k.strip())
    except ValueError:
        raise CommandError(ExitCode.INVALID, f"--redact: one or more of {', '.join(PiiKind)}") from None
    if args.moderation_url:
        try:
            split_url(args.moderation_url)
        except RefusedUrl as exc:
            raise CommandError(ExitCode.INVALID, f"--moderation-url: {exc}") from None
    config = GuardrailConfig(
        block_keywords=tuple(w.strip() for w in (args.block_keywords or "").split(",") if w.strip()),
        block_patterns=tuple(args.block_regex or ()),
        redact=redact,
        moderation_url=args.moderation_url,
        moderation_fail_closed=args.moderation_fail == "closed",
        **({} if args.moderation_timeout is None else {"moderation_timeout_s": args.moderation_timeout}),
    )
    if not config.enabled:
        raise CommandError(ExitCode.INVALID, NO_FILTER)
    given = [flag for flag, dest in MODERATION_TUNING.items() if getattr(args, dest) is not None]
    if given and not args.moderation_url:  # they would be stored, unused, looking like a change
        need = "needs" if len(given) == 1 else "need"
        raise CommandError(ExitCode.INVALID, f"{' and '.join(given)} {need} --moderation-url")
    try:
        config.check()
    except ValueError as exc:
        raise CommandError(ExitCode.INVALID, str(exc)) from None
    return config


def add_guardrail_parser(projects_sub: Any) -> None:
    guard = projects_sub.add_parser(
        "set-guardrails", help="replace the filters run on a project's message texts at create"
    )
    guard.add_argument("project", help="project name or id")
    guard.add_argument("--off", action="store_true", help="no guardrails (the default)")
    guard.add_argument("--block-keywords", dest="block_keywords", help="words that block a record: a,b,…")
    guard.add_argument(
        "--block-regex",
        dest="block_regex",
        type=_block_pattern,
        action="append",
        help="NAME=REGEX (repeatable)",
    )
    guard.add_argument("--redact", help=f"PII to redact: {', '.join(PiiKind)} (comma-separated)")
    guard.add_argument("--moderation-url", dest="moderation_url", help="OpenAI-moderation-shaped endpoint")
    guard.add_argument(
        "--moderation-timeout",
        dest="moderation_timeout",
        type=float,
        help=f"seconds (default {GuardrailConfig.moderation_timeout_s:g}; with --moderation-url)",
    )
    guard.add_argument(
        "--moderation-fail",
        dest="moderation_fail",
        choices=("open", "closed"),
        help="when the endpoint fails: let records through (open, the default) or block them "
        "(closed); with --moderation-url",
    )
