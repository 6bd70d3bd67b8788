"""The container image, built and run (`make test-image`; opt-in: root, the Docker Engine, minutes).

The Dockerfile is built on a Debian base made here (tests/image/engine.py), compose.yaml's
services run as containers of it on the host's network (tests/image/stack.py), and the `openai`
SDK drives a batch through them; the image's default command runs the whole stack in one
container. README.md (Deployment) says what this proves and what only a registry can.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import docker
import pytest

from tests import compose
from tests.image.engine import LABEL, PYTHON_VERSION, SUITE
from tests.image.stack import ContainerCompose
from tests.otlp_sink import OtlpSink
from tests.support import fresh_database, stack_env

pytestmark = [pytest.mark.image, pytest.mark.timeout(1200)]

DEBIAN_MAJOR = {"bookworm": "12"}


def test_the_base_has_the_official_images_debian_and_python(engine: docker.DockerClient, base: str) -> None:
    probe = "cat /etc/debian_version; python --version; python -m venv --help > /dev/null && echo venv"
    out = engine.containers.run(base, ["sh", "-c", probe], network_mode="host", remove=True).decode()
    debian, python, venv = out.split()[0], out.split()[2], out.split()[3]
    assert debian.split(".")[0] == DEBIAN_MAJOR[SUITE], out
    assert python.rsplit(".", 1)[0] == PYTHON_VERSION, out
    assert venv == "venv"


def test_the_image_is_configured_as_the_dockerfile_says(engine: docker.DockerClient, image: str) -> None:
    dockerfile = compose.read_dockerfile()
    config = engine.images.get(image).attrs["Config"]
    final = dockerfile.final
    assert config["User"] == final.instruction("USER")[-1]
    assert config["Entrypoint"] == json.loads(final.instruction("ENTRYPOINT")[-1])
    assert config["Cmd"] == json.loads(final.instruction("CMD")[-1])
    exposed = {f"{p}/tcp" for line in final.instruction("EXPOSE") for p in line.split()}
    assert set(config["ExposedPorts"]) == exposed
    env = dict(item.split("=", 1) for item in config["Env"])
    assert env["PATH"].startswith("/opt/batchgate/bin:/usr/local/sbin:")
    assert {k: v for k, v in dockerfile.env.items() if "$" not in v}.items() <= env.items()


@pytest.mark.postgres
def test_compose_services_run_as_containers_and_serve_the_sdk_flow(
    engine: docker.DockerClient, image: str, tmp_path: Path
) -> None:
    parsed, _ = compose.load()
    with fresh_database("postgres", tmp_path, prefix="bg_image") as url:
        stack = ContainerCompose(
            parsed,
            compose.read_dockerfile().env,
            url,
            profiles=frozenset({"simulator"}),
            scale={"executor": 2},
            client=engine,
            image=image,
        )
        with OtlpSink(stack.collector_port()) as sink, stack.running():
            started = sorted(f"{name}-{c.name.rsplit('-', 1)[1]}" for name, c in stack.containers)
            assert started == [
                "envoy-0", "executor-0", "executor-1", "ingest-0", "results-0", "scheduler-0", "simulator-0"
            ]  # fmt: skip
            for _, container in stack.containers:
                assert container.attrs["HostConfig"]["NetworkMode"] == "host"
            # `docker compose run --rm migrate keys create`
            key = stack.run_once("migrate", ["keys", "create", "--name", "image"]).strip()
            compose.check_sdk_batch(stack.api_url(), key, prefix="image")
            compose.wait_for_telemetry(sink)

            # `docker compose stop`: every service exits cleanly, none restarted on the way.
            stopped = stack.stop()
            assert {name: (s.exit_code, s.restarts) for name, s in stopped.items()} == {
                name: (0, 0) for name in stopped
            }


def test_the_default_command_runs_the_whole_stack_in_one_container(
    engine: docker.DockerClient, image: str, tmp_path: Path
) -> None:
    """`docker run IMAGE`: `up`, SQLite in the container's data directory, the simulator."""
    ports = {k: v for k, v in stack_env(tmp_path, "").items() if k.endswith("_PORT")}
    container = engine.containers.run(
        image,
        detach=True,
        name=f"bgimg-up-{tmp_path.name}"[:60],
        labels={LABEL: "up"},
        network_mode="host",
        environment={**ports, "BATCHGATE_HOST": "127.0.0.1"},
    )
    try:
        deadline = time.monotonic() + 120
        while container.exec_run(["batchgate", "health", "envoy", "--quiet"]).exit_code != 0:
            container.reload()
            assert container.status == "running", container.logs(tail=200).decode()
            assert time.monotonic() < deadline, container.logs(tail=200).decode()
            time.sleep(0.5)
        created = container.exec_run(["batchgate", "keys", "create", "--name", "image"], stderr=False)
        assert created.exit_code == 0, created.output
        api = f"http://127.0.0.1:{ports['BATCHGATE_PORT']}/v1"
        compose.check_sdk_batch(api, created.output.decode().strip(), prefix="up")
        container.stop(timeout=30)
        container.reload()
        assert container.attrs["State"]["ExitCode"] == 0, container.logs(tail=200).decode()
    except BaseException:
        print(container.logs(tail=400).decode(errors="replace"))
        raise
    finally:
        container.remove(force=True)
