"""The `batchgate` command: operator verbs (server_cli) and client verbs (client_cli).

Every verb ends with the exit codes of `batchgate.exit_codes`: a `CommandError` is printed as
`error: …` and exits with its code; argparse's own usage errors exit 2 like invalid input, and
so does a bad setting (`SettingError`, raised wherever a verb loads the settings).
"""

from __future__ import annotations

import argparse
import sys

from batchgate import client_cli, server_cli, templates_cli
from batchgate.exit_codes import CommandError, ExitCode
from batchgate.services.common.setting_checks import SettingError

INTERRUPTED = 130


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="batchgate", description="Self-hosted LLM Batch API gateway.")
    parser.add_argument("--config", help="YAML settings file (or BATCHGATE_CONFIG)")
    sub = parser.add_subparsers(dest="command", required=True)
    server_cli.add_commands(sub)
    client_cli.add_commands(sub)
    templates_cli.add_commands(sub)
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    try:
        args.func(args)
    except CommandError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        sys.exit(int(exc.code))
    except SettingError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(int(ExitCode.INVALID))
    except KeyboardInterrupt:
        sys.exit(INTERRUPTED)


if __name__ == "__main__":
    main()
