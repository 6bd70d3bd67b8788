"""The Dockerfile: multi-stage, slim, non-root, and what it installs runs without the source tree.

No container engine runs here, so the image's build step is repeated by hand: the same files the
Dockerfile copies are built into a wheel, installed apart from the repository, and the installed
package must find its data (Envoy template, descriptor set, Lua filter, migrations).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from services.common.config import Settings
from tests.compose import ROOT, read_dockerfile
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


def test_dockerfile_exposes_the_configured_ports() -> None:
    exposed = {int(p) for line in read_dockerfile().final.instruction("EXPOSE") for p in line.split()}
    defaults = Settings()
    ports = {defaults.port, defaults.ingest_port, defaults.scheduler_port, defaults.results_port}
    assert exposed == ports | {defaults.executor_port, defaults.simulator_port}


def _copied_sources() -> list[str]:
    """What the build stage copies from the build context."""
    build = read_dockerfile().stages[0]
    return [src for arguments in build.instruction("COPY") for src in arguments.split()[:-1]]


def test_the_image_copies_every_package_and_the_context_keeps_them() -> None:
    sources = _copied_sources()
    packages = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    assert {p.rstrip("*") for p in packages["find"]["include"]} <= set(sources)
    ignored = {line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()}
    assert not ignored & set(sources)
    assert ".venv" in ignored and ".git" in ignored


def test_what_the_image_installs_runs_without_the_source_tree(tmp_path: Path) -> None:
    context = tmp_path / "context"
    context.mkdir()
    for source in _copied_sources():
        path = ROOT / source
        if path.is_dir():
            shutil.copytree(path, context / source, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(path, context / source)
    wheels, site = tmp_path / "wheels", tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--quiet"]
    build = [*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(context)]
    subprocess.run(build, check=True, timeout=300)
    wheel = next(wheels.glob("batchgate-*.whl"))
    subprocess.run([*pip, "install", "--no-deps", "--target", str(site), str(wheel)], check=True, timeout=300)

    # The installed copy comes first on the path; the working directory holds no source.
    env = clean_environ({"PYTHONPATH": str(site), "BATCHGATE_DATA_DIR": str(tmp_path / "data")})
    script = (
        "import batchgate, gateway, services, sys; "
        "assert all(m.__file__.startswith(sys.argv[1]) for m in (batchgate, gateway, services)); "
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
    config = (tmp_path / "envoy.yaml").read_text()
    assert str(site / "gateway" / "api.pb") in config
