"""Repositories and the unit of work speak to backends only through the protocol.

The walk reads ``hermes_store/repositories``, ``uow`` and ``domain`` with
:mod:`ast` and lists every place that would tie them to one backend: an
import of a concrete backend package (or of ``sqlalchemy.dialects``), a
comparison with a dialect's name, and a backend picked by ``importlib``.
Each finding is printed as ``file:line``, so a failure says where to look.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from sqlalchemy import create_engine
from sqlalchemy.dialects import registry
from sqlalchemy.dialects.sqlite.pysqlite import SQLiteDialect_pysqlite
from sqlalchemy.engine import URL, Engine, make_url

from hermes_store.backends import BACKENDS, backend_of, create_store_engine
from hermes_store.backends.base import Backend
from hermes_store.errors import UnknownBackendError
from tests.support.paths import REPO

PACKAGE = REPO / "hermes_store"
WATCHED = ("repositories", "uow", "domain")
DIALECT_NAMES = {"sqlite", "postgresql"}
CONCRETE = (
    "hermes_store.backends.sqlite",
    "hermes_store.backends.postgresql",
    "sqlalchemy.dialects",
)


def _is_concrete(module: str) -> bool:
    return any(module == name or module.startswith(name + ".") for name in CONCRETE)


def _names_dialect(node: ast.AST) -> bool:
    """Whether ``node`` is a dialect's name as a literal (alone or in a tuple, list or set)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value in DIALECT_NAMES
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return any(_names_dialect(element) for element in node.elts)
    return False


def _picks_backend(call: ast.Call) -> bool:
    """An ``import_module`` whose name (literal or f-string parts) points at a backend."""
    marks = ("dialects", "backends", *DIALECT_NAMES)
    for node in ast.walk(call):
        text = node.value if isinstance(node, ast.Constant) else None
        if isinstance(text, str) and any(mark in text for mark in marks):
            return True
    return False


def _findings_in(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    where = path.relative_to(PACKAGE.parent)
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _is_concrete(alias.name):
                    found.append(f"{where}:{node.lineno}: imports {alias.name}")
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if _is_concrete(module):
                found.append(f"{where}:{node.lineno}: imports from {module}")
            elif module == "hermes_store.backends":
                for alias in node.names:
                    if alias.name in DIALECT_NAMES:
                        found.append(f"{where}:{node.lineno}: imports backends.{alias.name}")
        elif isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(_names_dialect(operand) for operand in operands):
                found.append(f"{where}:{node.lineno}: compares with a dialect name")
        elif isinstance(node, ast.Dict):
            if any(key is not None and _names_dialect(key) for key in node.keys):
                found.append(f"{where}:{node.lineno}: keys a table by dialect name")
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name == "import_module" and _picks_backend(node):
                found.append(f"{where}:{node.lineno}: picks a backend module with importlib")
    return found


def boundary_findings() -> list[str]:
    """Every place in the watched packages that names or imports a concrete backend."""
    found: list[str] = []
    for folder in WATCHED:
        for path in sorted((PACKAGE / folder).rglob("*.py")):
            found.extend(_findings_in(path))
    return found


def test_repositories_and_units_name_no_backend() -> None:
    found = boundary_findings()
    for line in found:
        print(line)
    assert found == [], f"{len(found)} dialect branches outside backends/:\n" + "\n".join(found)


def test_the_walk_sees_a_branch(tmp_path: Path) -> None:
    """The checker itself finds each kind of branch (so a pass above means something)."""
    sample = PACKAGE / "repositories" / "_boundary_sample_tmp.py"
    sample.write_text(
        "import importlib\n"
        "from hermes_store.backends.sqlite import engine\n"
        "import sqlalchemy.dialects.postgresql\n"
        "x = conn.dialect.name == 'postgresql'\n"
        "y = name in ('sqlite', 'other')\n"
        "z = {'sqlite': 1}\n"
        "m = importlib.import_module(f'sqlalchemy.dialects.{package}')\n"
        "n = importlib.import_module(f'{__name__}.search')\n",
        encoding="utf-8",
    )
    try:
        found = _findings_in(sample)
    finally:
        sample.unlink()
    assert len(found) == 6, found


class ThirdDialect(SQLiteDialect_pysqlite):
    """A dialect of another name (on an in-memory SQLite underneath): a real engine to ask."""

    name = "hermesthird"


registry.register("hermesthird", __name__, "ThirdDialect")


class _ThirdBackend:
    """A third backend as a new package would add it: here only its engine is needed."""

    name = "hermesthird"

    def __init__(self) -> None:
        self.engines: list[Engine] = []

    def create_engine(self, url: URL, *_rules: object, read_only: bool = False) -> Engine:
        engine = create_engine(url)
        self.engines.append(engine)
        return engine


def test_a_registered_third_backend_is_what_backend_of_returns() -> None:
    third = _ThirdBackend()
    BACKENDS["hermesthird"] = third  # type: ignore[assignment]
    try:
        engine = create_store_engine(make_url("hermesthird://"))
        assert third.engines == [engine]  # the registry picked its engine factory
        assert engine.dialect.name == "hermesthird"
        assert backend_of(engine) is third
        with engine.connect() as connection:
            assert backend_of(connection) is third
            assert connection.exec_driver_sql("SELECT 1").scalar() == 1
        engine.dispose()
    finally:
        del BACKENDS["hermesthird"]
    with pytest.raises(UnknownBackendError, match="hermesthird"):
        backend_of(engine)


def test_the_registered_backends_implement_the_protocol() -> None:
    assert set(BACKENDS) == {"sqlite", "postgresql"}
    for name, backend in BACKENDS.items():
        assert backend.name == name
        assert isinstance(backend, Backend)


def test_an_unknown_dialect_is_a_store_error() -> None:
    engine = create_engine("sqlite://")
    saved = BACKENDS.pop("sqlite")
    try:
        with pytest.raises(UnknownBackendError, match="sqlite"):
            backend_of(engine)
    finally:
        BACKENDS["sqlite"] = saved
