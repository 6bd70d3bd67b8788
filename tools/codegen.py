"""Regenerate every artefact derived from protos/: Python stubs and Envoy's descriptor set.

The protos are the single source of truth for the API. Their derived forms are committed so a
clean clone runs without a code generator step, and `tests/unit/test_codegen.py` fails when
any of them is stale. Run `make gen` (this module) after editing a .proto file.
"""

from __future__ import annotations

import argparse
import filecmp
import shutil
import sys
import tempfile
from pathlib import Path

from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "protos"
THIRD_PARTY = ROOT / "third_party" / "googleapis"
GENERATED_PACKAGES = ("batchgate/v1", "batchgate/internal/v1")
DESCRIPTOR_SET = "gateway/api.pb"
PUBLIC_PROTO_DIR = "batchgate/v1"


def _protoc(args: list[str]) -> None:
    wkt = Path(protoc.__file__).parent / "_proto"  # google/protobuf/*.proto shipped with grpcio-tools
    argv = ["protoc", f"-I{PROTO_ROOT}", f"-I{THIRD_PARTY}", f"-I{wkt}", *args]
    if protoc.main(argv) != 0:
        raise SystemExit(f"protoc failed: {' '.join(argv)}")


def _proto_files(package_dir: str) -> list[str]:
    return sorted(str(p.relative_to(PROTO_ROOT)) for p in (PROTO_ROOT / package_dir).glob("*.proto"))


def generate(out: Path) -> list[str]:
    """Write every derived artefact under `out`; returns their paths relative to `out`."""
    written: list[str] = []
    for package_dir in GENERATED_PACKAGES:
        (out / package_dir).mkdir(parents=True, exist_ok=True)
        _protoc(
            [
                f"--python_out={out}",
                f"--pyi_out={out}",
                f"--grpc_python_out={out}",
                *_proto_files(package_dir),
            ]
        )
    (out / Path(DESCRIPTOR_SET).parent).mkdir(parents=True, exist_ok=True)
    _protoc(
        ["--include_imports", f"--descriptor_set_out={out / DESCRIPTOR_SET}", *_proto_files(PUBLIC_PROTO_DIR)]
    )
    for package_dir in GENERATED_PACKAGES:
        written += [str(p.relative_to(out)) for p in sorted((out / package_dir).glob("*_pb2*.py*"))]
    written.append(DESCRIPTOR_SET)
    return written


def stale_artefacts() -> list[str]:
    """Paths whose committed content differs from a fresh generation (empty when up to date)."""
    with tempfile.TemporaryDirectory() as tmp:
        fresh = Path(tmp)
        stale = []
        for rel in generate(fresh):
            committed = ROOT / rel
            if not committed.exists() or not filecmp.cmp(fresh / rel, committed, shallow=False):
                stale.append(rel)
        for package_dir in GENERATED_PACKAGES:
            for committed in (ROOT / package_dir).glob("*_pb2*.py*"):
                if not (fresh / committed.relative_to(ROOT)).exists():
                    stale.append(str(committed.relative_to(ROOT)))
        return stale


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="only report stale artefacts")
    args = parser.parse_args()
    if args.check:
        stale = stale_artefacts()
        if stale:
            sys.exit("stale generated files (run `make gen`): " + ", ".join(stale))
        print("generated files are up to date")
        return
    for package_dir in GENERATED_PACKAGES:
        for old in (ROOT / package_dir).glob("*_pb2*.py*"):
            old.unlink()
    with tempfile.TemporaryDirectory() as tmp:
        for rel in generate(Path(tmp)):
            (ROOT / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(Path(tmp) / rel, ROOT / rel)
    from tools.config_docs import update_readme

    update_readme()
    print("regenerated stubs,", DESCRIPTOR_SET, "and the README settings and limits tables")


if __name__ == "__main__":
    main()
