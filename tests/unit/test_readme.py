"""README.md, the users' manual, stays true to the code: limits, commands, exit codes."""

from __future__ import annotations

import re
import shlex

from batchgate.cli import build_parser
from batchgate.exit_codes import ExitCode
from tools.config_docs import README, limits_block, readme_limits_block

SHELL_BLOCK = re.compile(r"```sh\n(.*?)```", re.S)
COMMAND_LINE = re.compile(r"^(?:[A-Z_][A-Z0-9_]*=\S*\s+)*batchgate\s")


def _commands(text: str) -> list[list[str]]:
    """Every `batchgate …` command in the README's shell examples, arguments split."""
    commands = []
    for block in SHELL_BLOCK.findall(text):
        for line in block.replace("\\\n", " ").splitlines():
            if COMMAND_LINE.match(line):
                words = shlex.split(line, comments=True)
                commands.append(words[words.index("batchgate") + 1 :])
    return commands


def test_readme_limits_table_is_current() -> None:
    assert readme_limits_block(README.read_text()) == limits_block(), "run `make gen` to refresh README.md"


def test_every_batchgate_command_in_the_readme_parses() -> None:
    commands = _commands(README.read_text())
    verbs = {words[0] for words in commands}
    assert {"batches", "migrate", "serve", "envoy"} <= verbs, verbs
    parser = build_parser()
    for words in commands:
        try:
            parser.parse_args(words)
        except SystemExit:
            raise AssertionError(
                f"README shows `batchgate {' '.join(words)}`, which does not parse"
            ) from None


def test_readme_documents_every_exit_code() -> None:
    text = README.read_text()
    section = text[text.index("### Exit codes") :]
    documented = {int(code) for code in re.findall(r"^\| (\d) \|", section, flags=re.M)}
    assert documented == {int(code) for code in ExitCode}
