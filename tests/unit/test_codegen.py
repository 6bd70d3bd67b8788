"""The protos are the single source of truth: derived files must match a fresh generation."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tools.codegen import ROOT, stale_artefacts


def test_generated_stubs_and_descriptor_set_are_current() -> None:
    assert stale_artefacts() == [], "run `make gen` and commit the result"


def test_buf_lint_passes() -> None:
    buf = shutil.which("buf", path=str(Path(sys.executable).parent))
    assert buf, "buf (from buf-bin) must be installed in the virtualenv"
    result = subprocess.run([buf, "lint"], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
