"""The Docker Engine for `make test-image`: a daemon, a Debian base made on this machine, and the
project's image built on it.

No image registry is reachable here, so the Dockerfile's base, `python:3.11-slim-bookworm`,
cannot be pulled. A base made from Debian's own packages stands in for it: Debian bookworm (the
release the official tag names) by debootstrap, with Python 3.11 from `python3` plus `venv`,
the `python` command, CA certificates, netbase and tzdata (what the Dockerfile and the official
slim image rely on), imported with `docker import` under a tag only these tests use. The
Dockerfile is built unchanged on it through its `BASE_IMAGE` build argument.

Networking is the host's only. A daemon this module starts has no default bridge
(`--bridge=none`) and touches no iptables rule or forwarding sysctl; every build step and
container runs with network mode `host`, so nothing here takes a private-range address.

Kept between runs, under BATCHGATE_IMAGE_CACHE (default /var/cache/batchgate-test-image):
`debs/`, debootstrap's downloaded packages, and `docker/`, the data root of a daemon started
here (the base image and the build's layers). The base is made again only when its recipe
changes (a label on the image records it).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import docker
from docker.errors import APIError, DockerException, ImageNotFound

from tests.compose import ROOT, read_dockerfile

CACHE = Path(os.environ.get("BATCHGATE_IMAGE_CACHE", "/var/cache/batchgate-test-image"))
RUN_DIR = Path("/run/batchgate-test-image")
"""The started daemon's socket, pid file and exec root (short paths: unix sockets live there)."""
LABEL = "batchgate.test-image"
"""On every container and volume the tests create: what the clean-up removes."""

SUITE = "bookworm"
"""The Debian release of the official base image (`python:3.11-slim-bookworm`)."""
PACKAGES = ("python3", "python3-venv", "python-is-python3", "ca-certificates", "netbase", "tzdata")
MIRROR = os.environ.get("BATCHGATE_IMAGE_MIRROR", "http://deb.debian.org/debian")
PYTHON_VERSION = read_dockerfile().args["PYTHON_VERSION"]
BASE_TAG = f"batchgate-test/python:{PYTHON_VERSION}-slim-{SUITE}"
IMAGE_TAG = "batchgate-test/batchgate:local"
BASE_CHANGES = (
    # What the official image's config sets and `docker import` leaves empty; the Dockerfile's
    # `ENV PATH=/opt/batchgate/bin:$PATH` extends this PATH.
    "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "ENV LANG=C.UTF-8",
    'CMD ["python3"]',
)
LOCAL_CAS = Path("/usr/local/share/ca-certificates")
"""This machine's own CAs (e.g. of an egress proxy): the build's pip reaches PyPI through it."""
RECIPE_LABEL = "batchgate.test-base.recipe"
DAEMON_START_S = 60
DAEMON_STOP_S = 60
DEBOOTSTRAP_S = 900
BUILD_S = 900


def _connect(url: str) -> docker.DockerClient | None:
    """A client of the daemon at `url` if one answers there."""
    try:
        client = docker.DockerClient(base_url=url, version="auto", timeout=BUILD_S)
    except DockerException:
        return None
    try:
        client.ping()
    except DockerException:
        client.close()
        return None
    return client


def remove_leftovers(client: docker.DockerClient) -> None:
    """Containers and volumes of these tests, of this run or one that was killed."""
    for container in client.containers.list(all=True, filters={"label": LABEL}):
        container.remove(force=True)
    for volume in client.volumes.list(filters={"label": LABEL}):
        volume.remove(force=True)


@contextlib.contextmanager
def docker_engine() -> Iterator[docker.DockerClient]:
    """A client of the daemon DOCKER_HOST (or the default socket) names when one answers, else
    of a daemon started for the run and stopped after it. Either way nothing of the tests'
    own is left on it."""
    try:
        client = docker.from_env(timeout=BUILD_S)
    except DockerException:
        context: contextlib.AbstractContextManager[docker.DockerClient] = _own_daemon()
    else:
        context = contextlib.closing(client)
    with context as engine:
        remove_leftovers(engine)
        try:
            yield engine
        finally:
            remove_leftovers(engine)


@contextlib.contextmanager
def _own_daemon() -> Iterator[docker.DockerClient]:
    dockerd = shutil.which("dockerd")
    if dockerd is None:
        raise RuntimeError(
            "no Docker Engine answers and dockerd is not installed (apt-get install docker.io)"
        )
    RUN_DIR.mkdir(parents=True, exist_ok=True)
    (CACHE / "docker").mkdir(parents=True, exist_ok=True)
    url = f"unix://{RUN_DIR / 'docker.sock'}"
    pidfile = RUN_DIR / "dockerd.pid"
    log_path = CACHE / "dockerd.log"
    process: subprocess.Popen[bytes] | None = None
    client = _connect(url)  # a daemon that a killed run left behind is reused, and stopped after
    if client is None:
        argv = [
            dockerd,
            f"--host={url}",
            f"--data-root={CACHE / 'docker'}",
            f"--exec-root={RUN_DIR / 'exec'}",
            f"--pidfile={pidfile}",
            "--bridge=none",
            "--iptables=false",
            "--ip-forward=false",
            "--ip-masq=false",
        ]
        with log_path.open("ab") as log:
            process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + DAEMON_START_S
        while (client := _connect(url)) is None:
            if process.poll() is not None or time.monotonic() > deadline:
                _stop_daemon(pidfile, process)
                raise RuntimeError(f"dockerd did not start:\n{_tail(log_path)}")
            time.sleep(0.5)
    try:
        yield client
    finally:
        client.close()
        _stop_daemon(pidfile, process)
        _unmount_under(RUN_DIR)  # the network namespace dockerd leaves mounted in its exec root


def _stop_daemon(pidfile: Path, process: subprocess.Popen[bytes] | None = None) -> None:
    """SIGTERM to the daemon this module started, then wait: `process`, or else the one a killed
    run left, named by the pid file and checked to be that dockerd (never a recycled pid)."""
    if process is not None:
        pid = process.pid
    else:
        try:
            pid = int(pidfile.read_text())
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError):
            return
        if f"--pidfile={pidfile}".encode() not in argv:
            return

    def running() -> bool:
        if process is not None:
            return process.poll() is None  # also reaps it
        try:
            return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
        except OSError:
            return False

    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + DAEMON_STOP_S
    while running():
        if time.monotonic() > deadline:
            raise RuntimeError(f"dockerd (pid {pid}) did not stop within {DAEMON_STOP_S} s")
        time.sleep(0.2)


def _tail(path: Path, chars: int = 4000) -> str:
    return path.read_text(errors="replace")[-chars:] if path.exists() else ""


# --- the base ----------------------------------------------------------------------------------


def _recipe() -> str:
    """What the base is made of: a new one is made when any of it changes."""
    certs = {
        cert.name: hashlib.sha256(cert.read_bytes()).hexdigest() for cert in sorted(LOCAL_CAS.glob("*.crt"))
    }
    recipe = {"suite": SUITE, "packages": PACKAGES, "changes": BASE_CHANGES, "certs": certs}
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:16]


def base_image(client: docker.DockerClient) -> str:
    """The stand-in for the official Python image (see the module docstring); its tag."""
    recipe = _recipe()
    with contextlib.suppress(ImageNotFound):
        if client.images.get(BASE_TAG).labels.get(RECIPE_LABEL) == recipe:
            return BASE_TAG
    if os.geteuid() != 0:
        raise RuntimeError(f"making {BASE_TAG} takes root (debootstrap, chroot): run make test-image as root")
    rootfs, tarball, log_path = CACHE / "rootfs", CACHE / "rootfs.tar", CACHE / "debootstrap.log"
    (CACHE / "debs").mkdir(parents=True, exist_ok=True)
    _remove_tree(rootfs)
    try:
        debootstrap = [
            "debootstrap",
            "--variant=minbase",
            f"--cache-dir={CACHE / 'debs'}",
            f"--include={','.join(PACKAGES)}",
            SUITE,
            str(rootfs),
            MIRROR,
        ]
        with log_path.open("wb") as log:
            done = subprocess.run(
                debootstrap, stdout=log, stderr=subprocess.STDOUT, timeout=DEBOOTSTRAP_S, check=False
            )
        if done.returncode != 0:
            raise RuntimeError(f"debootstrap failed ({done.returncode}):\n{_tail(log_path)}")
        for cert in sorted(LOCAL_CAS.glob("*.crt")):
            shutil.copy(cert, rootfs / "usr/local/share/ca-certificates" / cert.name)
        subprocess.run(
            ["chroot", str(rootfs), "update-ca-certificates"], capture_output=True, check=True, timeout=120
        )
        shutil.rmtree(rootfs / "var/lib/apt/lists", ignore_errors=True)  # as the official image does
        subprocess.run(
            ["tar", "-C", str(rootfs), "--numeric-owner", "-cf", str(tarball), "."], check=True, timeout=300
        )
        repository, tag = BASE_TAG.split(":")
        client.api.import_image_from_file(
            str(tarball),
            repository=repository,
            tag=tag,
            changes=[*BASE_CHANGES, f"LABEL {RECIPE_LABEL}={recipe}"],
        )
    finally:
        _remove_tree(rootfs)
        tarball.unlink(missing_ok=True)
    return BASE_TAG


def _unmount_under(path: Path) -> None:
    """Unmount everything mounted at or below `path`, deepest first."""
    root = str(path.resolve())

    def mounted() -> list[str]:
        points = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
        return sorted((p for p in points if p == root or p.startswith(root + "/")), key=len, reverse=True)

    for point in mounted():
        subprocess.run(["umount", "--lazy", point], check=True, timeout=60)
    if mounted():
        raise RuntimeError(f"{path} still has mounts: {mounted()}")


def _remove_tree(path: Path) -> None:
    """`rm -rf` of a debootstrap target. What an interrupted debootstrap left mounted in it
    (/proc, /sys) is unmounted first, so nothing outside it is ever deleted through a mount."""
    if path.exists():
        _unmount_under(path)
        shutil.rmtree(path)


# --- the image ---------------------------------------------------------------------------------


def build_image(client: docker.DockerClient, base: str) -> str:
    """`docker build --build-arg BASE_IMAGE=<base> --network host .` with the classic builder
    (the file's `# syntax=` line would make BuildKit pull a frontend image); its tag.

    Each earlier stage is built and tagged first (the full build then reuses it), so the images
    a rebuild replaces can be removed, with their layers: repeated runs keep one of each."""
    stages = [(stage.name, f"{IMAGE_TAG}-{stage.name}") for stage in read_dockerfile().stages[:-1]]
    builds = [*stages, (None, IMAGE_TAG)]
    previous = {tag: _image_id(client, tag) for _, tag in builds}
    log_path = CACHE / "build.log"
    with log_path.open("w") as log:
        for target, tag in builds:
            for chunk in client.api.build(
                path=str(ROOT),
                tag=tag,
                target=target,
                buildargs={"BASE_IMAGE": base},
                network_mode="host",
                rm=True,
                forcerm=True,
                decode=True,
                timeout=BUILD_S,
            ):
                log.write(chunk.get("stream", ""))
                if "error" in chunk:
                    log.flush()
                    raise RuntimeError(f"docker build failed: {chunk['error']}\n{_tail(log_path)}")
    for tag, old in previous.items():
        if old and old != _image_id(client, tag):
            with contextlib.suppress(APIError):  # still used by something else: keep it
                client.images.remove(old)
    return IMAGE_TAG


def _image_id(client: docker.DockerClient, tag: str) -> str | None:
    try:
        return str(client.images.get(tag).id)
    except ImageNotFound:
        return None
