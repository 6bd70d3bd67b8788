"""The Dockerfile: multi-stage, slim, non-root, and what it installs runs without the source tree.

`make test` needs no container engine, so the image's build step is repeated by hand: the same
files the Dockerfile copies are built into a wheel, installed apart from the repository, and the
installed package must find its data (Envoy template, descriptor set, Lua filter, migrations).
`make test-image` (opt-in, tests/image) builds the image itself and runs its containers.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
from pathlib import Path

from batchgate.services.common.config import Settings
from tests.compose import DOCKERFILE, ROOT, Stage, read_dockerfile
from tests.image import engine
from tests.support import clean_environ


def test_dockerfile_is_multi_stage_slim_and_non_root() -> None:
    dockerfile = read_dockerfile()
    assert len(dockerfile.stages) >= 2
    assert all("-slim" in stage.image for stage in dockerfile.stages), dockerfile.stages
    user = dockerfile.final.instruction("USER")[-1].split(":")[0]
    assert user not in ("root", "0")
    assert json.loads(dockerfile.final.instruction("ENTRYPOINT")[-1]) == ["batchgate"]
    env = dockerfile.env
    assert env["BATCHGATE_HOST"] == "0.0.0.0"
    settings = {f.metadata["env"] for f in dataclasses.fields(Settings) if "env" in f.metadata}
    assert {k for k in env if k.startswith("BATCHGATE_")} <= settings


def test_the_base_is_the_official_python_image_unless_a_build_arg_says_otherwise() -> None:
    """`make test-image` builds on a Debian base made locally (no registry there) through the
    BASE_IMAGE build argument; a plain `docker build` keeps the official image, and the local
    base is made of the same Debian release (its Python version is checked in the image)."""
    dockerfile = read_dockerfile()
    official = f"python:{dockerfile.args['PYTHON_VERSION']}-slim-bookworm"
    assert dockerfile.args["BASE_IMAGE"] == official
    assert [stage.image for stage in dockerfile.stages] == [official] * len(dockerfile.stages)
    froms = [line.split()[1] for line in DOCKERFILE.read_text().splitlines() if line.startswith("FROM ")]
    assert froms == ["${BASE_IMAGE}"] * len(dockerfile.stages)
    assert official.endswith(f"-slim-{engine.SUITE}")
    assert engine.BASE_TAG.startswith("batchgate-test/")  # the local base never passes for the official


def test_dockerfile_exposes_the_configured_ports() -> None:
    exposed = {int(p) for line in read_dockerfile().final.instruction("EXPOSE") for p in line.split()}
    defaults = Settings()
    ports = {defaults.port, defaults.ingest_port, defaults.scheduler_port, defaults.results_port}
    assert exposed == ports | {defaults.executor_port, defaults.simulator_port}


def _stage(name: str) -> Stage:
    return next(stage for stage in read_dockerfile().stages if stage.name == name)


def _copied_sources() -> list[str]:
    """What the build stage copies from the build context."""
    copies = [arguments.split() for arguments in _stage("build").instruction("COPY")]
    return [src for words in copies if not words[0].startswith("--from=") for src in words[:-1]]


def _panel_copies() -> list[tuple[Path, str]]:
    """What the build stage takes from the `panel` stage's `npm ci`, as (the same files here,
    where `make` ran `npm ci` on the same lock file; destination in the build context)."""
    panel = _stage("panel")
    workdir = Path(panel.instruction("WORKDIR")[-1])
    lock_dir = Path(panel.instruction("COPY")[0].split()[0]).parent
    copies = []
    for arguments in _stage("build").instruction("COPY"):
        words = arguments.split()
        if words[0] == "--from=panel":
            copies.append((ROOT / lock_dir / Path(words[1]).relative_to(workdir), words[2]))
    return copies


def test_the_image_copies_every_package_and_the_context_keeps_them() -> None:
    sources = _copied_sources()
    # batchgate/services and batchgate/gateway link to these folders: the image needs them too.
    assert {"batchgate", "services", "gateway"} <= set(sources)
    ignored = {line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()}
    assert not ignored & set(sources)
    assert ".venv" in ignored and ".git" in ignored
    assert "**/node_modules" in ignored  # npm packages come from the panel stage's `npm ci` only
    assert [dest for _, dest in _panel_copies()] == ["./gateway/ui/node_modules/papaparse"]


def test_what_the_image_installs_runs_without_the_source_tree(tmp_path: Path) -> None:
    context = tmp_path / "context"
    context.mkdir()
    for source in _copied_sources():
        path = ROOT / source
        if path.is_dir():
            shutil.copytree(  # links kept, as COPY keeps them (batchgate/services, batchgate/gateway)
                path,
                context / source,
                symlinks=True,
                ignore=shutil.ignore_patterns("__pycache__", "node_modules"),
            )
        else:
            shutil.copy(path, context / source)
    for installed, dest in _panel_copies():
        shutil.copytree(installed, context / dest)
    wheels, site = tmp_path / "wheels", tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--quiet"]
    build = [*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(context)]
    subprocess.run(build, check=True, timeout=300)
    wheel = next(wheels.glob("batchgate-*.whl"))
    subprocess.run([*pip, "install", "--no-deps", "--target", str(site), str(wheel)], check=True, timeout=300)

    # The installed copy comes first on the path; the working directory holds no source.
    env = clean_environ({"PYTHONPATH": str(site), "BATCHGATE_DATA_DIR": str(tmp_path / "data")})
    script = (
        "import batchgate, batchgate.gateway, batchgate.services, sys; "
        "assert all(m.__file__.startswith(sys.argv[1]) "
        "for m in (batchgate, batchgate.gateway, batchgate.services)); "
        "from batchgate.cli import main; main(sys.argv[2:])"
    )
    for args in (["migrate"], ["certs", "init"], ["envoy-config", "--out", str(tmp_path / "envoy.yaml")]):
        run = subprocess.run(
            [sys.executable, "-c", script, str(site), *args],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert run.returncode == 0, run.stderr
    # Everything is inside the batchgate package: no generic top-level names.
    assert not (site / "services").exists() and not (site / "gateway").exists()
    config = (tmp_path / "envoy.yaml").read_text()
    assert str(site / "batchgate" / "gateway" / "api.pb") in config
    # The web panel ships in the image, its npm dependency included.
    for served in ("index.html", "app.js", "node_modules/papaparse/papaparse.min.js"):
        assert str(site / "batchgate" / "gateway" / "ui" / served) in config
