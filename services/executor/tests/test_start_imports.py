"""The executor has no database, so its process must not load the database layer: SQLAlchemy
and our `db` package were half of its import time (0.9 s → 0.4 s here), and an executor that
restarts after a crash starts calling sooner for it."""

from __future__ import annotations

import subprocess
import sys


def test_the_executor_server_loads_no_database_code() -> None:
    probe = (
        "import sys, batchgate.services.executor.server\n"
        "roots = ('sqlalchemy', 'batchgate.services.common.db')\n"
        "print(sorted(m for m in sys.modules if any(m == r or m.startswith(r + '.') for r in roots)))"
    )
    command = [sys.executable, "-c", probe]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]", done.stdout[:500]
