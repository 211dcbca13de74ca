"""A database that cannot be used fails in the store's own words, naming the file.

Real files in real states: garbage where a database should be, damaged
pages, a ``schema_version`` no program of ours wrote, a read-only file or
folder and a file of another user (as an unprivileged user, see
tests/support/unprivileged.py), a full disk (tests/support/full_disk_worker.py). Every
failure is one of the store's classes (``StoreError``), never sqlite3's or
SQLAlchemy's, and a write that failed left the file as it was.
"""

from __future__ import annotations

import os
from contextlib import closing
from pathlib import Path

import pytest

from hermes_store import (
    SchemaError,
    SessionDB,
    StoreAccessError,
    StoreCorruptError,
    StoreError,
    StoreFullError,
)
from hermes_store.backends.sqlite.library import driver as sqlite3
from tests.contention.test_full_disk import run_worker as run_full_disk
from tests.contention.test_full_disk import small_disks
from tests.support.unprivileged import as_other_user, give_to_other_user, shared_folder

pytestmark = pytest.mark.sqlite_only("what a SQLite file on disk can go through")


def _store_with_messages(path: Path, count: int = 200) -> None:
    with SessionDB(path) as db:
        db.create_session("s", "cli")
        db.append_messages(
            "s", [{"role": "user", "content": f"message {i} " + "x" * 300} for i in range(count)]
        )


def _store_in_a_folder_of_its_own(folder: Path) -> tuple[Path, Path]:
    """(folder, file): a store of three messages in a new folder under ``folder``."""
    home = folder / "home"
    home.mkdir()
    path = home / "state.db"
    _store_with_messages(path, 3)
    return home, path


def _messages(path: Path) -> int:
    with closing(sqlite3.connect(path)) as connection:
        return int(connection.execute("SELECT COUNT(*) FROM messages").fetchone()[0])


def test_a_file_that_is_not_a_database_is_named(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    path.write_bytes(b"this is a text file, not a database\n" * 300)
    with pytest.raises(StoreCorruptError, match="not a database") as raised:
        SessionDB(path)
    assert str(path) in str(raised.value)
    assert isinstance(raised.value, StoreError)


def test_damaged_pages_are_named_not_a_driver_error(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    _store_with_messages(path)
    with closing(sqlite3.connect(path)) as connection:
        (root,) = connection.execute(
            "SELECT rootpage FROM sqlite_master WHERE name = 'messages'"
        ).fetchone()
        (page_size,) = connection.execute("PRAGMA page_size").fetchone()
    with path.open("r+b") as raw:  # the messages table's root page: garbage
        raw.seek((root - 1) * page_size)
        raw.write(b"\xff" * page_size)
    with SessionDB(path) as db, pytest.raises(StoreCorruptError, match="malformed") as raised:
        db.get_messages("s")
    assert str(path) in str(raised.value)


def test_a_schema_version_that_is_not_a_number_is_a_schema_error(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    SessionDB(path).close()
    with closing(sqlite3.connect(path)) as connection:
        connection.execute("UPDATE schema_version SET version = 'abc'")
        connection.commit()
    with pytest.raises(SchemaError, match="'abc'"):
        SessionDB(path)


def test_a_write_to_a_read_only_file_names_the_file_and_changes_nothing() -> None:
    with shared_folder() as folder:
        path = folder / "state.db"
        _store_with_messages(path, 3)
        give_to_other_user(path)
        path.chmod(0o400)

        def append() -> int:
            with SessionDB(path) as db:
                return db.append_message("s", "user", "never lands")

        kind, message = as_other_user(append)
        assert kind == StoreAccessError.__name__, message
        assert f"{path} is read-only" in message
        assert _messages(path) == 3


def test_a_read_in_a_read_only_folder_names_the_folder() -> None:
    """SQLite must create ``-wal`` and ``-shm`` beside the file; it said "readonly database"."""
    with shared_folder() as folder:
        home, path = _store_in_a_folder_of_its_own(folder)
        give_to_other_user(home, path)
        home.chmod(0o500)

        def read() -> int:
            with SessionDB(path) as db:
                return db.message_count()

        kind, message = as_other_user(read)
        assert kind == StoreAccessError.__name__, message
        assert f"its folder {home} is read-only" in message


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can make a file another user owns")
def test_a_loose_file_of_another_user_is_refused_by_name_not_as_a_bare_permission_error() -> None:
    with shared_folder() as folder:
        home, path = _store_in_a_folder_of_its_own(folder)
        give_to_other_user(home)  # the folder is the user's, the file root's
        path.chmod(0o644)  # readable by everyone: it has to be tightened, which only root may

        kind, message = as_other_user(lambda: SessionDB(path).close())
        assert kind == StoreAccessError.__name__, message
        assert str(path) in message and "permission denied" in message
        assert "owned by uid 0" in message


@pytest.mark.skipif(not small_disks(), reason="needs user namespaces to mount a small tmpfs")
def test_a_full_disk_refuses_the_write_by_name_and_keeps_the_file(db_path: Path) -> None:
    report = run_full_disk("commit", db_path, on_small_disk=True)
    assert report["refused"].startswith(f"hermes_store.errors.{StoreFullError.__name__}: ")
    assert str(db_path) in report["refused"] and "disk is full" in report["refused"]
    assert report["stored"] == 1, "the refused append left nothing behind"
