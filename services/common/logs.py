"""Process-wide logging setup: one line per record, to stderr."""

from __future__ import annotations

import logging
import sys


def setup(service: str, level: str = "INFO") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(f"%(asctime)s %(levelname)s [{service}] %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for noisy in ("aiohttp.access", "sqlalchemy.engine", "alembic.runtime.migration"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
