"""The layout's rules, checked on the source (README "Architecture"):

- SQL lives only in `services/common/db/`: no other production module imports SQLAlchemy, the
  tables (`db.schema`) or the dialect's statement builders;
- a service never imports another service's modules (cross-service work goes over gRPC), and
  `services/common` imports no service;
- layers: the generated stubs import nothing of ours, services import only the stubs and
  each other's common code, `gateway` nothing of the CLI; the CLI is on top;
- the wheel installs every package under `batchgate` (`services/` and `gateway/` too);
- no production module is longer than 400 lines.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SERVICES = ("ingest", "scheduler", "executor", "results")
SERVICES_PACKAGE = "batchgate.services"
DB_PACKAGE = "batchgate.services.common.db"
STUBS = ("batchgate.v1", "batchgate.internal")
# What a service may take from the dialect module: operations, not statement builders.
DIALECT_OPERATIONS = {"notify", "Listener", "LeaderLock"}
MAX_LINES = 400


def _production_modules() -> list[Path]:
    found = []
    for top in ("services", "batchgate", "gateway"):
        for path in sorted((ROOT / top).rglob("*.py")):
            relative = path.relative_to(ROOT)
            if relative.parts[:2] in (("batchgate", "services"), ("batchgate", "gateway")):
                continue  # the links to the top-level folders, read as themselves
            if (
                "tests" in relative.parts
                or "node_modules" in relative.parts
                or path.name.endswith(("_pb2.py", "_pb2_grpc.py"))
            ):
                continue
            found.append(relative)
    return found


def _module_name(relative: Path) -> str:
    """The installed name: `services/…` and `gateway/…` live inside the batchgate package."""
    name = ".".join(relative.with_suffix("").parts).removesuffix(".__init__")
    return name if relative.parts[0] == "batchgate" else f"batchgate.{name}"


def _ours(module: str) -> bool:
    return module == "batchgate" or module.startswith("batchgate.")


def _imports(relative: Path) -> list[tuple[str, set[str]]]:
    """(module imported, names taken from it) for every import in the file, nested ones too."""
    tree = ast.parse((ROOT / relative).read_text())
    found: list[tuple[str, set[str]]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, set()) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.module, {alias.name for alias in node.names}))
    return found


MODULES = _production_modules()


@pytest.mark.parametrize(
    "relative", [m for m in MODULES if not _module_name(m).startswith(DB_PACKAGE)], ids=str
)
def test_sql_lives_only_in_the_db_package(relative: Path) -> None:
    for module, names in _imports(relative):
        assert module.split(".")[0] != "sqlalchemy", (
            f"{relative} imports {module}: SQL belongs in {DB_PACKAGE}"
        )
        assert module != f"{DB_PACKAGE}.schema", f"{relative} uses the tables: call a {DB_PACKAGE} operation"
        if module == f"{DB_PACKAGE}.dialect":
            assert names <= DIALECT_OPERATIONS, (
                f"{relative} builds SQL with {sorted(names - DIALECT_OPERATIONS)}"
            )


@pytest.mark.parametrize("relative", [m for m in MODULES if m.parts[0] == "services"], ids=str)
def test_no_service_imports_another(relative: Path) -> None:
    own = relative.parts[1]
    for module, names in _imports(relative):
        parts = module.split(".")
        targets = [parts[2]] if module.startswith(f"{SERVICES_PACKAGE}.") else []
        if module == SERVICES_PACKAGE:
            targets = list(names)
        for target in targets:
            if target in SERVICES:
                assert target == own, (
                    f"{relative} imports {module} ({names or ''}): call that service over gRPC"
                )


@pytest.mark.parametrize("relative", MODULES, ids=str)
def test_no_layer_imports_a_layer_above(relative: Path) -> None:
    name = _module_name(relative)
    ours = [module for module, _ in _imports(relative) if _ours(module)]
    if name.startswith(SERVICES_PACKAGE):
        allowed = (SERVICES_PACKAGE, *STUBS)
    elif name.startswith("batchgate.gateway"):
        allowed = ("batchgate.gateway", SERVICES_PACKAGE, *STUBS)
    else:
        return  # the CLI, on top, may import anything
    above = [m for m in ours if not any(m == a or m.startswith(f"{a}.") for a in allowed)]
    assert not above, f"{relative} imports {above}, a layer above it"


def test_the_wheel_installs_every_package_under_batchgate() -> None:
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    packages = {_module_name(m.parent / "__init__.py") for m in MODULES if m.name == "__init__.py"}
    assert set(setuptools["packages"]) == packages
    for folder in ("services", "gateway"):  # installed as batchgate.services, batchgate.gateway
        assert (ROOT / "batchgate" / folder).resolve() == ROOT / folder


def test_no_production_module_is_longer_than_400_lines() -> None:
    long = {str(m): n for m in MODULES if (n := len((ROOT / m).read_text().splitlines())) > MAX_LINES}
    assert not long, f"split these by concern: {long}"


def test_the_rules_see_the_code() -> None:
    """The checks above read real modules (a wrong root would pass them vacuously)."""
    names = {_module_name(m) for m in MODULES}
    assert {
        "batchgate.services.common.db.batches",
        "batchgate.services.ingest.batch_create",
        "batchgate.cli",
    } <= names
