"""The panel's JavaScript unit tests (CSV → records, formatting, rate and ETA, key checks and
which failures are retried), run with node.

They import the modules the browser loads (`gateway/ui/*.js`) and the Papa Parse build the
panel serves, so they need `make`'s `npm ci` in gateway/ui, as the panel itself does.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
JS_TESTS = sorted((Path(__file__).parent / "panel").glob("*.test.mjs"))


def test_the_panel_javascript_unit_tests_pass() -> None:
    node = shutil.which("node")
    assert node, "node is needed for the panel's JavaScript tests (Node.js 20+)"
    assert JS_TESTS
    run = subprocess.run(
        [node, "--test", *map(str, JS_TESTS)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-8000:] + run.stderr[-2000:]
    assert "# fail 0" in run.stdout
