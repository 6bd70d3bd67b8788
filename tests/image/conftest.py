"""The Docker Engine and the image, made once for every test of `make test-image`."""

from __future__ import annotations

from collections.abc import Iterator

import docker
import pytest

from tests.image.engine import base_image, build_image, docker_engine


@pytest.fixture(scope="session")
def engine() -> Iterator[docker.DockerClient]:
    with docker_engine() as client:
        yield client


@pytest.fixture(scope="session")
def base(engine: docker.DockerClient) -> str:
    return base_image(engine)


@pytest.fixture(scope="session")
def image(engine: docker.DockerClient, base: str) -> str:
    return build_image(engine, base)
