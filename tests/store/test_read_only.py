"""``Store(read_only=True)`` / ``SessionDB(read_only=True)``: look, never touch.

Dashboards and web UIs read state.db while the agent writes it, sometimes
from a folder they cannot write. A read-only store opens the file with
``mode=ro``: it never creates, migrates, adopts or tightens it, never takes
the write lock, reads old files as they are, and refuses every write with
:class:`~hermes_store.errors.ReadOnlyStoreError`, leaving the file as it was.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hermes_store import (
    ContentionPolicy,
    InvalidInputError,
    ReadOnlyStoreError,
    SchemaError,
    SessionDB,
    Store,
    StoreAccessError,
    StoreNotFoundError,
)
from hermes_store.backends.sqlite.library import driver as sqlite3
from tests.support.legacy_schema import LEGACY_VERSIONS, SEARCH_WORDS, build_legacy_db
from tests.support.paths import REPO
from tests.support.unprivileged import as_other_user, other_user, shared_folder

pytestmark = pytest.mark.sqlite_only("read-only opens of SQLite files")


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _store_file(path: Path) -> Path:
    with SessionDB(path) as db:
        db.create_session("s1", "cli", model="m")
        db.append_message("s1", "user", "hello docker world")
    return path


def test_a_missing_file_is_not_created(tmp_path: Path) -> None:
    path = tmp_path / "absent" / "state.db"
    with pytest.raises(StoreNotFoundError, match="never creates"):
        SessionDB(path, read_only=True)
    assert not path.parent.exists()


def test_an_empty_file_holds_no_store_and_stays_empty(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    path.touch()
    with pytest.raises(SchemaError, match="0 bytes, no store"):
        Store(path, read_only=True)
    assert path.read_bytes() == b""


def test_read_only_must_be_a_bool(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="read_only"):
        Store(tmp_path / "state.db", read_only="yes")  # type: ignore[arg-type]
    assert not (tmp_path / "state.db").exists()


WRITES: dict[str, Any] = {
    "create_session": lambda db: db.create_session("s2", "cli"),
    "append_message": lambda db: db.append_message("s1", "user", "more"),
    "append_messages": lambda db: db.append_messages("s1", [{"role": "user", "content": "x"}]),
    "end_session": lambda db: db.end_session("s1", "done"),
    "reopen_session": lambda db: db.reopen_session("s1"),
    "update_system_prompt": lambda db: db.update_system_prompt("s1", "p"),
    "update_token_counts": lambda db: db.update_token_counts("s1", input_tokens=1),
    "set_session_title": lambda db: db.set_session_title("s1", "T"),
    "clear_messages": lambda db: db.clear_messages("s1"),
    "prune_sessions": lambda db: db.prune_sessions(0),
    "delete_session": lambda db: db.delete_session("s1"),
}


@pytest.mark.parametrize("method", WRITES)
def test_every_write_is_refused_and_changes_nothing(tmp_path: Path, method: str) -> None:
    path = _store_file(tmp_path / "state.db")
    before = _digest(path)
    with SessionDB(path, read_only=True) as db:
        with pytest.raises(ReadOnlyStoreError, match="read-only"):
            WRITES[method](db)
        assert db.message_count() == 1
    assert _digest(path) == before


@pytest.mark.parametrize("version", LEGACY_VERSIONS)
def test_an_old_file_is_read_as_it_is_never_migrated(tmp_path: Path, version: int) -> None:
    path = tmp_path / "state.db"
    build_legacy_db(path, version)
    os.chmod(path, 0o644)
    before = _digest(path)
    with SessionDB(path, read_only=True) as db:
        root = db.get_session("sess_root")
        assert root is not None and root["source"] == "cli"
        assert root["cache_read_tokens"] is not None  # 0: what migrating would have filled in
        assert [m["role"] for m in db.get_messages("sess_root")][:1] == ["user"]
        for word, sessions in SEARCH_WORDS.items():
            assert {hit["session_id"] for hit in db.search_messages(word)} == sessions, word
        assert [row["id"] for row in db.get_ancestors("sess_grandchild")] == [
            "sess_grandchild",
            "sess_child",
            "sess_root",
        ]
        assert db.list_sessions_rich(limit=10)
        db.token_usage_by_model()
        db.top_sessions_by_tokens(3)
        db.export_all()
    assert _digest(path) == before
    assert os.stat(path).st_mode & 0o777 == 0o644
    with sqlite3.connect(path) as raw:
        tables = {row[0] for row in raw.execute("SELECT name FROM sqlite_master")}
        assert "alembic_version" not in tables
        assert raw.execute("SELECT version FROM schema_version").fetchall() == [(version,)]


def test_reading_never_waits_for_the_write_lock(tmp_path: Path) -> None:
    path = _store_file(tmp_path / "state.db")
    writer = sqlite3.connect(path, isolation_level=None)
    try:
        writer.execute("BEGIN IMMEDIATE")
        writer.execute("INSERT INTO sessions (id, source, started_at) VALUES ('w', 'cli', 1)")
        impatient = ContentionPolicy(patience_s=0, busy_timeout_ms=0)
        with SessionDB(store=Store(path, read_only=True, policy=impatient)) as db:
            assert db.get_session("w") is None  # its snapshot: the writer has not committed
            assert db.message_count() == 1
    finally:
        writer.execute("ROLLBACK")
        writer.close()


_READER = """
import json, sys
from hermes_store import SessionDB
db = SessionDB(sys.argv[1], read_only=True)
print(json.dumps([db.message_count(), sorted(h["id"] for h in db.search_messages("docker"))]))
"""


def _read_without_root_privileges(path: Path) -> list[Any]:
    """Read in a child process that, though root, obeys file permissions (no DAC override)."""
    import json

    result = subprocess.run(
        [
            "setpriv",
            "--bounding-set=-dac_override,-dac_read_search,-fowner",
            sys.executable,
            "-c",
            _READER,
            str(path),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return list(json.loads(result.stdout))


@pytest.mark.skipif(
    shutil.which("setpriv") is None and os.geteuid() == 0,
    reason="needs util-linux setpriv to drop root's permission override",
)
def test_a_folder_this_process_cannot_write_while_the_agent_writes(tmp_path: Path) -> None:
    folder = tmp_path / "readonly"
    folder.mkdir()
    path = folder / "state.db"
    writer = SessionDB(path)
    try:
        writer.create_session("s1", "cli")
        writer.append_message("s1", "user", "hello docker")
        for file in folder.iterdir():
            os.chmod(file, 0o644)
        os.chmod(folder, 0o555)
        read = _read_without_root_privileges if os.geteuid() == 0 else _read_here
        assert read(path) == [1, [1]]  # the writer is open: -wal and -shm exist
        writer.append_message("s1", "user", "more docker")
        assert read(path) == [2, [1, 2]]
    finally:
        writer.close()  # the last connection: SQLite removes -wal
    assert read(path) == [2, [1, 2]]  # no -wal, no way to make -shm: read as it is
    os.chmod(folder, 0o755)


def _read_here(path: Path) -> list[Any]:
    with SessionDB(path, read_only=True) as db:
        return [db.message_count(), sorted(h["id"] for h in db.search_messages("docker"))]


def _cli_as_other_user(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``hermes-store ARGS`` in a process of the other user (``nobody`` under root)."""
    command = [sys.executable, "-m", "hermes_store.cli", *args]
    if os.geteuid() == 0:
        uid, gid = other_user()
        command = ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", *command]
    environment = {**os.environ, "PYTHONPATH": str(REPO), "HERMES_HOME": str(home)}
    environment.update(NO_COLOR="1", COLUMNS="200")
    return subprocess.run(command, capture_output=True, text=True, env=environment, timeout=120)


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="needs root and util-linux setpriv to run as a user the file is not writable for",
)
def test_printing_a_title_and_upgrading_a_current_file_need_no_write_access() -> None:
    with shared_folder() as folder:
        path = _store_file(folder / "state.db")
        with SessionDB(path) as db:
            db.set_session_title("s1", "docker notes")
        path.chmod(0o644)  # root's file: the other user may read it, not write it
        before = _digest(path)

        printed = _cli_as_other_user(folder, "title", "s1", "--db", str(path))
        assert printed.returncode == 0, printed.stderr
        assert printed.stdout.strip() == "docker notes"
        upgraded = _cli_as_other_user(folder, "upgrade", "--db", str(path))
        assert upgraded.returncode == 0, upgraded.stderr
        assert "already at head" in upgraded.stdout
        # Setting one writes: refused by name, in one line.
        refused = _cli_as_other_user(folder, "title", "s1", "new", "--db", str(path))
        assert refused.returncode == 1 and "Traceback" not in refused.stderr
        assert str(path) in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
        assert _digest(path) == before
        assert sorted(p.name for p in folder.iterdir()) == ["state.db"]


def test_a_writable_open_refused_for_this_user_suggests_the_read_only_one() -> None:
    with shared_folder() as folder:
        path = _store_file(folder / "state.db")
        path.chmod(0o644)
        if os.geteuid() != 0:
            path.chmod(0o444)

        def writable() -> None:
            SessionDB(path).close()

        def read_only() -> int:
            with SessionDB(path, read_only=True) as db:
                return db.message_count()

        kind, message = as_other_user(writable)
        assert kind == StoreAccessError.__name__, message
        assert "SessionDB(path, read_only=True)" in message
        assert as_other_user(read_only) == ("ok", 1)
