"""The SQLite library under the store: a release without the WAL-reset bug, or a warning.

The suite itself runs on the library the store chooses; the tests that need
the affected one (Python's own, here 3.40.1) run the store in a child process
with ``HERMES_STORE_SQLITE=system``, so that two SQLite libraries never share
one process (they would break each other's file locks).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hermes_store import SessionDB
from hermes_store.backends.sqlite import library
from hermes_store.backends.sqlite.library import driver as sqlite3
from hermes_store.backends.sqlite.library import is_affected
from hermes_store.tools.backup import backup
from hermes_store.tools.recovery.recover import recover

pytestmark = pytest.mark.sqlite_only("which SQLite library the store links")

_SYSTEM = tuple(int(p) for p in __import__("sqlite3").sqlite_version.split("."))


@pytest.mark.parametrize(
    ("version", "affected"),
    [
        ((3, 6, 23), False),
        ((3, 7, 0), True),
        ((3, 40, 1), True),
        ((3, 44, 5), True),
        ((3, 44, 6), False),
        ((3, 45, 0), True),
        ((3, 50, 6), True),
        ((3, 50, 7), False),
        ((3, 51, 2), True),
        ((3, 51, 3), False),
        ((3, 52, 0), False),
        ((3, 53, 4), False),
    ],
)
def test_the_affected_releases(version: tuple[int, int, int], affected: bool) -> None:
    assert is_affected(version) is affected


def _connections_version(db: SessionDB) -> str:
    with db.store.engine.connect() as connection:
        return str(connection.exec_driver_sql("SELECT sqlite_version()").scalar_one())


def test_the_store_and_its_tools_run_on_a_fixed_release(tmp_path: Path) -> None:
    """Store, backup and recover open their files with a library outside the affected range."""
    db = SessionDB(tmp_path / "state.db")
    db.create_session("s", "cli")
    db.append_message("s", "user", "hello 你好世界")
    version = _connections_version(db)
    assert not is_affected(tuple(int(p) for p in version.split(".")))
    assert version == library.VERSION and not library.AFFECTED
    # Every FTS feature the store uses is in it: the trigram index finds CJK text.
    assert [h["session_id"] for h in db.search_messages("你好世界")] == ["s"]
    db.close()
    made = backup(tmp_path / "state.db", tmp_path / "backups")
    connection = sqlite3.connect(made.path)
    assert connection.execute("SELECT sqlite_version()").fetchone()[0] == version
    connection.close()
    recover(tmp_path / "state.db", tmp_path / "recovered.db")
    with SessionDB(tmp_path / "recovered.db") as again:
        assert [m["content"] for m in again.get_messages("s")] == ["hello 你好世界"]


def test_version_and_check_name_the_library(tmp_path: Path) -> None:
    shown = subprocess.run(
        [sys.executable, "-m", "hermes_store.cli", "--version"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert f"SQLite {library.VERSION} ({library.MODULE})" in shown
    assert "free of the WAL-reset bug" in shown
    SessionDB(tmp_path / "state.db").close()
    checked = subprocess.run(
        [sys.executable, "-m", "hermes_store.cli", "check", "--db", str(tmp_path / "state.db")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert f"SQLite library: ok ({library.VERSION}" in checked


_ON_SYSTEM = """
import json, logging, sys
from hermes_store import SessionDB
from hermes_store.backends.sqlite import library
warnings = []
class Keep(logging.Handler):
    def emit(self, record):
        warnings.append(record.getMessage())
logging.getLogger("hermes_store.backends.sqlite.library").addHandler(Keep())
modes = {}
for name in sys.argv[1:]:
    for _ in range(2):  # opened twice: warned once
        db = SessionDB(name)
        db.create_session("s", "cli")
        with db.store.engine.connect() as connection:
            modes[name] = connection.exec_driver_sql("PRAGMA journal_mode").scalar_one()
        db.close()
print(json.dumps({"affected": library.AFFECTED, "module": library.MODULE,
                  "warnings": warnings, "modes": modes}))
"""


@pytest.mark.skipif(not is_affected(_SYSTEM), reason="Python's own SQLite here is already fixed")
def test_an_affected_library_warns_once_per_file_and_keeps_new_files_out_of_wal(
    tmp_path: Path,
) -> None:
    existing = tmp_path / "existing.db"
    SessionDB(existing).close()  # made on the fixed library: in WAL already
    fresh = tmp_path / "fresh.db"
    done = subprocess.run(
        [sys.executable, "-c", _ON_SYSTEM, str(fresh), str(existing)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "HERMES_STORE_SQLITE": "system"},
    )
    seen = json.loads(done.stdout)
    assert seen["affected"] is True and seen["module"] == "sqlite3"
    assert seen["modes"] == {str(fresh): "delete", str(existing): "wal"}
    assert len(seen["warnings"]) == 2, seen["warnings"]
    for name, warning in zip((fresh, existing), seen["warnings"], strict=True):
        assert warning.startswith(f"{name}: the linked SQLite ")
        assert "WAL-reset bug" in warning and "3.51.3" in warning and "pysqlite3" in warning
    checked = subprocess.run(
        [sys.executable, "-m", "hermes_store.cli", "check", "--db", str(fresh)],
        capture_output=True,
        text=True,
        env={**os.environ, "HERMES_STORE_SQLITE": "system"},
    )
    assert "SQLite library: SQLite 3." in checked.stdout
    assert "has the WAL-reset bug" in checked.stdout


def test_a_wrong_library_choice_is_named() -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import hermes_store.backends.sqlite.library"],
        capture_output=True,
        text=True,
        env={**os.environ, "HERMES_STORE_SQLITE": "postgres"},
    )
    assert done.returncode != 0
    assert "HERMES_STORE_SQLITE='postgres' is not a SQLite library choice" in done.stderr
