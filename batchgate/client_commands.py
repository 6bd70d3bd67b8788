"""The wiring every client-side command group shares (`batches`, `files`, `usage`,
`templates`): the common options, the API client they make and the verb helper that binds a
handler to a subcommand. Public so that each command group is its own module."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any

from batchgate.api_client import ApiClient
from batchgate.exit_codes import CommandError, ExitCode
from batchgate.services.common.loading import load_settings

BASE_URL_ENV = "BATCHGATE_BASE_URL"
API_KEY_ENV = "BATCHGATE_API_KEY"

Handler = Callable[[argparse.Namespace, ApiClient], ExitCode]


def client(args: argparse.Namespace) -> ApiClient:
    """The REST client for the command's --base-url/--api-key (or their environment)."""
    base_url = args.base_url or os.environ.get(BASE_URL_ENV) or f"{load_settings(args.config).base_url}/v1"
    api_key = args.api_key or os.environ.get(API_KEY_ENV)
    if not api_key:
        raise CommandError(
            ExitCode.INVALID,
            f"no API key: pass --api-key or set {API_KEY_ENV} (an operator creates one with "
            "`batchgate keys create`)",
        )
    return ApiClient(base_url, api_key, args.timeout)


def runner(handler: Handler) -> Callable[[argparse.Namespace], None]:
    """An argparse `func` that runs `handler` with a client and exits with its code."""

    def run(args: argparse.Namespace) -> None:
        with client(args) as api:
            code = handler(args, api)
        if code != ExitCode.OK:
            sys.exit(int(code))

    return run


def common_options() -> argparse.ArgumentParser:
    """The options of every client command (a parent parser)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--base-url", help=f"REST base URL with /v1 (default: ${BASE_URL_ENV}, else this host's gateway)"
    )
    common.add_argument("--api-key", help=f"API key (default: ${API_KEY_ENV})")
    common.add_argument("--json", action="store_true", help="print the API's JSON answer (for scripts)")
    common.add_argument("--timeout", type=float, default=60.0, help="seconds per HTTP call (default 60)")
    return common


def add_verb(
    verbs: Any,
    common: argparse.ArgumentParser,
    name: str,
    handler: Handler,
    help: str,
    *positionals: str,
) -> argparse.ArgumentParser:
    """Subcommand `name` of a command group, with the common options and `positionals`."""
    parser: argparse.ArgumentParser = verbs.add_parser(name, parents=[common], help=help)
    for positional in positionals:
        parser.add_argument(positional)
    parser.set_defaults(func=runner(handler))
    return parser
