"""The `batchgate` command: operator verbs (server_cli)."""

from __future__ import annotations

import argparse

from batchgate import server_cli


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="batchgate", description="Self-hosted LLM Batch API gateway.")
    parser.add_argument("--config", help="YAML settings file (or BATCHGATE_CONFIG)")
    sub = parser.add_subparsers(dest="command", required=True)
    server_cli.add_commands(sub)
    args = parser.parse_args(argv)
    args.func(args)


if __name__ == "__main__":
    main()
