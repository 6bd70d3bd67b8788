"""Parsing of the `keys` and `projects` flags into values and policy changes.

Each flag type turns one command-line word into what the database stores (`none`, `all`,
`never` and `default` mean "no limit" or "the setting"); `policy_arguments` declares the policy
flags shared by `create` and `set-policy`, and `apply_policy_flags` changes only those given.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import replace
from typing import Any

from batchgate.services.common.access_policy import ALL_SCOPES, Feature, Policy, Scope, parse_scopes
from batchgate.services.common.windows import parse_window


def _amount(value: str, unset: str, what: str) -> float | None:
    """A finite number of 0 or more, or the word `unset` (None)."""
    if value.lower() == unset:
        return None
    amount = float(value)
    if not (amount >= 0 and math.isfinite(amount)):  # nan, inf and 1e999 (JSON has none of them)
        raise argparse.ArgumentTypeError(f"{what} 0 or more, or '{unset}' (a finite amount)")
    return amount


def budget(value: str) -> float | None:
    """A `--budget` value: USD (0 or more), or `none` for no cap."""
    return _amount(value, "none", "a budget is a USD amount of")


def _models(value: str) -> frozenset[str] | None:
    """`--allow-models a,b` (or `all`: no restriction)."""
    if value.lower() == "all":
        return None
    return frozenset(m.strip() for m in value.split(",") if m.strip())


def _limit(value: str) -> int | None:
    """A `--max-…` value: a positive count, or `none`."""
    if value.lower() == "none":
        return None
    count = int(value)
    if count < 1:
        raise argparse.ArgumentTypeError("a limit is 1 or more, or 'none'")
    return count


def scopes(value: str) -> frozenset[Scope]:
    try:
        return ALL_SCOPES if value.lower() == "all" else parse_scopes(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def expires_in(value: str) -> float | None:
    """`--expires-in 90s|30m|12h|7d` → seconds (or `never`)."""
    if value.lower() == "never":
        return None
    try:
        return float(parse_window(value))
    except ValueError:
        raise argparse.ArgumentTypeError("a duration like 90s, 30m, 12h or 7d, or 'never'") from None


def _features(value: str) -> frozenset[Feature]:
    try:
        return frozenset(Feature(f.strip()) for f in value.split(",") if f.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"features: {', '.join(Feature)} (comma-separated)") from None


def _days(value: str) -> float | None:
    """A `--…-days` value: 0 or more, or `default` (the setting)."""
    return _amount(value, "default", "days are")


def _fraction(value: str) -> float | None:
    """A `--rate-share` value: above 0 and at most 1, or `none`."""
    share = _amount(value, "none", "a share is")
    if share is not None and not 0 < share <= 1:
        raise argparse.ArgumentTypeError("a share is above 0 and at most 1, or 'none'")
    return share


def _yes_no(value: str) -> bool:
    if value.lower() not in ("yes", "no"):
        raise argparse.ArgumentTypeError("yes or no")
    return value.lower() == "yes"


def policy_arguments(parser: argparse.ArgumentParser, *, project: bool) -> None:
    """The policy flags; one not given is absent from the parsed arguments (it changes nothing)."""
    unset = argparse.SUPPRESS
    parser.add_argument(
        "--allow-models", dest="allowed_models", type=_models, default=unset, help="a,b,… or all"
    )
    parser.add_argument(
        "--max-records", dest="max_records", type=_limit, default=unset, help="records per batch, or none"
    )
    parser.add_argument(
        "--max-concurrent",
        dest="max_concurrent_batches",
        type=_limit,
        default=unset,
        help="batches open at once, or none",
    )
    parser.add_argument(
        "--expedited", type=_yes_no, default=unset, help="whether priority 'expedited' is allowed (yes|no)"
    )
    if project:
        parser.add_argument(
            "--features", type=_features, default=unset, help=f"features turned on: {', '.join(Feature)}"
        )
        parser.add_argument(
            "--rate-share",
            dest="rate_share",
            type=_fraction,
            default=unset,
            help="share (0-1) of each provider's requests per minute, or none",
        )
        for flag, what in (("retention", "data"), ("bookkeeping", "bookkeeping")):
            parser.add_argument(
                f"--{flag}-days",
                dest=f"{flag}_days",
                type=_days,
                default=unset,
                help=f"days a batch's {what} is kept after it ends; 0 keeps it; default: the setting",
            )


POLICY_FLAGS = (
    "allowed_models",
    "max_records",
    "max_concurrent_batches",
    "features",
    "rate_share",
    "retention_days",
    "bookkeeping_days",
)


def apply_policy_flags(policy: Policy, args: argparse.Namespace) -> Policy:
    """`policy` with the flags given on the command line changed (`all`/`none` clear one)."""
    changes: dict[str, Any] = {name: getattr(args, name) for name in POLICY_FLAGS if hasattr(args, name)}
    if hasattr(args, "expedited"):
        changes["expedited"] = None if args.expedited else False
    return replace(policy, **changes)
