"""state.db and its sidecars are created private, tightened if loose, never via a symlink."""

from __future__ import annotations

import os
import pwd
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from hermes_store import SessionDB
from hermes_store.backends.sqlite.library import driver as sqlite3
from hermes_store.backends.sqlite.private_files import UnsafeDatabasePathError

pytestmark = pytest.mark.sqlite_only("file permissions of state.db and its -wal/-shm")


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_new_database_and_sidecars_are_0600(db_path: Path) -> None:
    old_umask = os.umask(0o022)  # a typical umask would give 0644
    try:
        db = SessionDB(db_path)
        db.create_session("s1", "cli")
        db.append_message("s1", "user", "secret conversation")
        sidecars = [Path(f"{db_path}-wal"), Path(f"{db_path}-shm")]
        assert all(p.exists() for p in sidecars)
        assert [mode(p) for p in (db_path, *sidecars)] == [0o600, 0o600, 0o600]
        db.close()
    finally:
        os.umask(old_umask)


def test_existing_loose_file_is_tightened_without_breaking_other_connections(
    db_path: Path,
) -> None:
    SessionDB(db_path).close()
    os.chmod(db_path, 0o644)
    other = sqlite3.connect(db_path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process's write lock survives the chmod
    db = SessionDB(db_path)
    assert mode(db_path) == 0o600
    other.execute("INSERT INTO sessions (id, source, started_at) VALUES ('x', 'cli', 1)")
    other.execute("COMMIT")
    assert db.get_session("x") is not None
    db.close()
    other.close()


def test_symlink_at_the_path_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.db"
    link = tmp_path / "state.db"
    link.symlink_to(target)
    with pytest.raises(UnsafeDatabasePathError, match="symbolic link"):
        SessionDB(link)
    assert not target.exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a file to another user")
def test_an_empty_file_of_another_user_is_not_made_a_store(tmp_path: Path) -> None:
    """Left by someone in a folder others may write: the store would stay theirs to read."""
    planted = tmp_path / "state.db"
    planted.touch(mode=0o666)
    nobody = pwd.getpwnam("nobody")
    os.chown(planted, nobody.pw_uid, nobody.pw_gid)
    with pytest.raises(UnsafeDatabasePathError, match="empty file owned by nobody"):
        SessionDB(planted).create_session("s1", "cli")
    info = planted.lstat()
    assert (info.st_size, info.st_uid) == (0, nobody.pw_uid), "left as it was found"
    os.chown(planted, os.geteuid(), os.getegid())  # an empty file of one's own is a new store
    with SessionDB(planted) as db:
        db.create_session("s1", "cli")
    assert mode(planted) == 0o600


@pytest.mark.parametrize("umask", [0o000, 0o022, 0o077])
def test_hermes_home_and_every_folder_the_store_makes_are_0700(tmp_path: Path, umask: int) -> None:
    """Before, HERMES_HOME was made with the process umask: 0777 under umask 000."""
    existing = tmp_path / "existing"
    existing.mkdir()
    existing.chmod(0o755)
    home = existing / "made" / "for" / "hermes"
    script = (
        f"import os; os.umask({umask}); from hermes_store import SessionDB; SessionDB().close()"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        env={**os.environ, "HERMES_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    for folder in (home, home.parent, home.parent.parent):
        assert mode(folder) == 0o700, (folder, oct(mode(folder)))
    assert mode(home / "state.db") == 0o600
    assert mode(existing) == 0o755, "a folder that existed is left as it was"
