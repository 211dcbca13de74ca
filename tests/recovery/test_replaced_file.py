"""A state.db replaced under running stores: no write goes to the unlinked file.

Real processes hold the store open while the test puts another file at the
path with ``os.replace`` (what ``mv`` and a restore from backup do). Hard
links keep the old file and its ``-wal`` reachable, so the test can prove
that nothing was written to them afterwards.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from hermes_store import SessionDB
from hermes_store.backends.sqlite.library import driver as sqlite3
from hermes_store.errors import StoreReplacedError
from hermes_store.tools.backup import backup
from tests.support.paths import REPO, SUPPORT
from tests.support.unprivileged import as_other_user, give_to_other_user, other_user, shared_folder

pytestmark = pytest.mark.sqlite_only("a SQLite file replaced at its path")

WORKER = SUPPORT / "store_worker.py"


class Worker:
    """A store open in another process."""

    def __init__(self, path: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(WORKER), str(path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        assert self.ask_raw() == {"ok": "ready"}

    def ask_raw(self, line: str | None = None) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        if line is not None:
            self.process.stdin.write(line + "\n")
            self.process.stdin.flush()
        return json.loads(self.process.stdout.readline())

    def ask(self, line: str) -> Any:
        answer = self.ask_raw(line)
        assert "ok" in answer, answer
        return answer["ok"]

    def close(self) -> None:
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.write("quit\n")
            self.process.stdin.flush()
            self.process.wait(timeout=60)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def rows(path: Path) -> list[str]:
    connection = sqlite3.connect(path)
    try:
        assert connection.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        return [r[0] for r in connection.execute("SELECT content FROM messages ORDER BY id")]
    finally:
        connection.close()


def test_a_restore_under_two_running_stores_is_followed_and_the_old_file_untouched(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.db"
    db = SessionDB(path)
    db.create_session("s1", "cli")
    db.append_message("s1", "user", "one")
    db.close()
    restore = backup(path, tmp_path / "backups").path  # holds "one" only
    gateway, cli = Worker(path), Worker(path)
    try:
        gateway.ask("append s1 two")
        cli.ask("append s1 three")  # both hold the file, its -wal has recent frames
        assert Path(f"{path}-wal").stat().st_size > 0
        os.link(path, tmp_path / "old.db")
        os.link(f"{path}-wal", tmp_path / "old.db-wal-link")
        old = (digest(tmp_path / "old.db"), digest(tmp_path / "old.db-wal-link"))

        os.replace(restore, path)  # mv backup state.db, agents still running

        gateway.ask("append s1 after-gateway")
        assert gateway.ask("messages s1") == ["one", "after-gateway"]
        cli.ask("append s1 after-cli")  # notices later, must not undo the gateway's move
        assert cli.ask("messages s1") == ["one", "after-gateway", "after-cli"]
        assert gateway.ask("messages s1") == ["one", "after-gateway", "after-cli"]
    finally:
        gateway.close()
        cli.close()
    assert (digest(tmp_path / "old.db"), digest(tmp_path / "old.db-wal-link")) == old
    assert rows(path) == ["one", "after-gateway", "after-cli"]
    fresh = SessionDB(path)  # a process started after it all sees the same
    assert [m["content"] for m in fresh.get_messages("s1")] == rows(path)
    fresh.close()


def store_with_a_session(path: Path) -> None:
    db = SessionDB(path)
    db.create_session("s1", "cli")
    db.close()


def test_a_file_moved_away_is_refused_and_nothing_is_created(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    store_with_a_session(path)
    worker = Worker(path)
    try:
        assert worker.ask("messages s1") == []
        os.rename(path, tmp_path / "moved.db")
        answer = worker.ask_raw("messages s1")
        assert answer["error"] == "StoreReplacedError"
        assert str(path) in answer["message"] and "moved away or deleted" in answer["message"]
        assert not path.exists()
    finally:
        worker.close()


def test_a_file_that_is_not_a_store_is_refused_and_left_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    store_with_a_session(path)
    other = tmp_path / "other.db"
    connection = sqlite3.connect(other)
    connection.execute("CREATE TABLE notes (body TEXT)")
    connection.commit()
    connection.close()
    worker = Worker(path)
    try:
        worker.ask("append s1 before")
        os.replace(other, path)
        before = digest(path)
        for _ in range(2):  # refused every time, not only the first
            answer = worker.ask_raw("append s1 after")
            assert answer["error"] == "StoreReplacedError", answer
            assert "not a hermes_store database" in answer["message"]
        assert digest(path) == before
    finally:
        worker.close()


def test_a_relative_path_is_not_taken_for_a_replaced_file_after_a_chdir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    db = SessionDB("state.db")
    db.create_session("s1", "cli")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    db.append_message("s1", "user", "still the same file")
    assert [m["content"] for m in db.get_messages("s1")] == ["still the same file"]
    db.close()
    assert not (elsewhere / "state.db").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another user")
def test_a_store_file_another_user_swaps_in_is_refused_and_not_written(tmp_path: Path) -> None:
    """Before, the store followed the other user's file ("now using the new file") and wrote
    the next private message into a file that user owns and reads."""
    with shared_folder() as folder:
        folder.chmod(0o777)  # what umask 000 made of a HERMES_HOME: anyone may rename in it
        path = folder / "state.db"
        store_with_a_session(path)
        theirs = backup(path, tmp_path / "backups").path  # a valid store at the head schema
        planted = folder / "theirs.db"
        shutil.copyfile(theirs, planted)
        give_to_other_user(planted)
        planted.chmod(0o666)
        worker = Worker(path)
        try:
            worker.ask("append s1 before")
            assert as_other_user(lambda: os.replace(planted, path)) == ("ok", None)
            before = digest(path)
            for _ in range(2):  # refused every time, not only the first
                answer = worker.ask_raw("append s1 secret")
                assert answer["error"] == "StoreReplacedError", answer
                assert "owned by nobody" in answer["message"], answer
            assert digest(path) == before and path.stat().st_uid == other_user()[0]
            assert "secret" not in rows(path)
        finally:
            worker.close()


def test_a_replacement_of_ours_is_made_private_as_opening_makes_it(tmp_path: Path) -> None:
    """Opening takes group and other permissions off a store file; following a replacement
    did not, so a 0644 restore stayed readable by everyone."""
    path = tmp_path / "state.db"
    store_with_a_session(path)
    restore = backup(path, tmp_path / "backups").path
    worker = Worker(path)
    try:
        worker.ask("append s1 before")
        restore.chmod(0o644)
        os.replace(restore, path)
        worker.ask("append s1 after")
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        for sidecar in (Path(f"{path}-wal"), Path(f"{path}-shm")):
            assert stat.S_IMODE(sidecar.stat().st_mode) == 0o600
    finally:
        worker.close()
    assert rows(path) == ["after"]


def test_a_symbolic_link_put_at_the_path_is_refused_not_followed(tmp_path: Path) -> None:
    """Opening refuses a symbolic link at the path; following a replacement followed it."""
    path = tmp_path / "state.db"
    store_with_a_session(path)
    elsewhere = backup(path, tmp_path / "backups").path
    worker = Worker(path)
    try:
        worker.ask("append s1 before")
        link = tmp_path / "link"
        link.symlink_to(elsewhere)
        os.replace(link, path)
        answer = worker.ask_raw("append s1 after")
        assert answer["error"] == "StoreReplacedError", answer
        assert "symbolic link" in answer["message"]
        assert rows(elsewhere) == []
    finally:
        worker.close()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another user")
def test_a_thread_that_connects_after_another_users_swap_is_refused_too(tmp_path: Path) -> None:
    """A thread's first unit may open a new connection by name (after a followed restore
    the pool holds none): it must not take whatever file is at the path for the store's own."""
    with shared_folder() as folder:
        folder.chmod(0o777)
        path = folder / "state.db"
        db = SessionDB(path)
        db.create_session("s1", "cli")
        copy = backup(path, tmp_path / "backups").path
        planted = folder / "theirs.db"
        shutil.copyfile(copy, planted)
        give_to_other_user(planted)
        os.replace(backup(path, tmp_path / "backups").path, path)  # a restore of our own:
        db.append_message("s1", "user", "restored")  # followed, and the idle pool emptied
        assert as_other_user(lambda: os.replace(planted, path)) == ("ok", None)
        before = digest(path)
        outcome: list[BaseException | int] = []

        def write() -> None:
            try:
                outcome.append(db.append_message("s1", "user", "secret"))
            except BaseException as error:  # reported to the test
                outcome.append(error)

        thread = threading.Thread(target=write)
        thread.start()
        thread.join(timeout=60)
        db.close()
        assert len(outcome) == 1 and isinstance(outcome[0], StoreReplacedError), outcome
        assert "owned by nobody" in str(outcome[0])
        assert digest(path) == before


def test_a_thread_that_connects_after_a_restore_follows_it_like_the_others(
    tmp_path: Path,
) -> None:
    """A connection made by name after a restore opens the new file directly; it must still
    be adopted the way a replaced connection adopts it (made private, the old file's
    sidecars detached), and the store's other threads then agree with it."""
    path = tmp_path / "state.db"
    db = SessionDB(path)
    db.create_session("s1", "cli")
    os.replace(backup(path, tmp_path / "backups").path, path)
    db.append_message("s1", "user", "one")  # followed: the idle pool is empty now
    restore = backup(path, tmp_path / "backups").path
    restore.chmod(0o644)
    os.replace(restore, path)
    done: list[object] = []
    thread = threading.Thread(target=lambda: done.append(db.append_message("s1", "user", "two")))
    thread.start()
    thread.join(timeout=60)
    assert len(done) == 1
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    db.append_message("s1", "user", "three")  # the first thread moves to the same file
    assert [m["content"] for m in db.get_messages("s1")] == ["one", "two", "three"]
    db.close()
    assert rows(path) == ["one", "two", "three"]
