"""The translation package stays fully typed and simple: `mypy --strict` and McCabe ≤ 12."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from mypy import api

PACKAGE = Path(__file__).resolve().parents[1] / "translate"


def test_the_package_passes_mypy_strict(tmp_path: Path) -> None:
    report, errors, status = api.run(["--strict", "--cache-dir", str(tmp_path), str(PACKAGE)])
    assert status == 0, report + errors


def test_no_function_is_more_complex_than_twelve() -> None:
    ruff = [
        sys.executable,
        "-m",
        "ruff",
        "check",
        "--select",
        "C90",
        "--config",
        "lint.mccabe.max-complexity=12",
    ]
    result = subprocess.run([*ruff, str(PACKAGE)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
