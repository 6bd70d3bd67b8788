"""Shared fixtures: one long-lived stack per database kind, reused by read-mostly tests."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import PG_ENV, RunningStack, fresh_database, pg_base_url, running_stack

DATABASE_KINDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
IMAGE_ENV = "BATCHGATE_TEST_IMAGE"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """PostgreSQL tests skip only when no server was named; a named one must be reachable.
    Container image tests (root, the Docker Engine, minutes) run only under `make test-image`."""
    skip_postgres = pytest.mark.skip(reason=f"{PG_ENV} not set")
    skip_image = pytest.mark.skip(reason=f"opt-in: `make test-image` ({IMAGE_ENV}=1)")
    for item in items:
        if "postgres" in item.keywords and not pg_base_url():
            item.add_marker(skip_postgres)
        if "image" in item.keywords and not os.environ.get(IMAGE_ENV):
            item.add_marker(skip_image)


@pytest.fixture(scope="session", params=DATABASE_KINDS)
def db_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="session")
def shared_stack(db_kind: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    """A stack with two projects ('default', 'other'), shared by tests that do not break it."""
    tmp: Path = tmp_path_factory.mktemp(f"stack-{db_kind}")
    with fresh_database(db_kind, tmp) as url, running_stack(tmp, url, projects=("default", "other")) as stack:
        yield stack


@pytest.fixture
def database_url(db_kind: str, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty database of the current kind for one test."""
    with fresh_database(db_kind, tmp_path) as url:
        yield url
