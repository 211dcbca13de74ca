"""``backup``: a consistent, verified, private copy while other processes write; bounded.

Real files, real writer processes: four processes append numbered messages
while the backup runs, and the backup must hold, for each of them, exactly a
prefix of what it committed (one snapshot: no gap, no half of a commit).
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.ops.damage import overwrite_pages, pages_of
from hermes_store import SessionDB
from hermes_store.backends.sqlite.library import driver as sqlite3
from hermes_store.errors import InvalidInputError
from hermes_store.tools.backup import BackupError, backup, backups_in
from tests.support.paths import REPO, SUPPORT

WORKER = SUPPORT / "append_worker.py"


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO)}


def _messages(path: Path, session: str) -> list[str]:
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return [
            row[0]
            for row in connection.execute(
                "SELECT content FROM messages WHERE session_id = ? ORDER BY id", (session,)
            )
        ]
    finally:
        connection.close()


@pytest.mark.sqlite_only("SQLite's online backup of a file being written")
def test_a_backup_taken_while_four_processes_append_holds_a_prefix_of_each(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.db"
    SessionDB(path).close()
    stop = tmp_path / "stop"
    names = [f"w{n}" for n in range(4)]
    workers = [
        subprocess.Popen(
            [sys.executable, str(WORKER), str(path), name, str(stop)],
            stdout=subprocess.PIPE,
            text=True,
            env=_env(),
        )
        for name in names
    ]
    try:
        deadline = time.monotonic() + 60
        while min(len(_messages(path, name)) for name in names) < 20:
            assert time.monotonic() < deadline, "the writers did not start"
            time.sleep(0.05)
        report = backup(path, tmp_path / "backups")
        running = [worker.poll() is None for worker in workers]
        # Each writer appends past what the backup holds before it is stopped: a fixed
        # pause left a writer starved of the CPU with nothing after the backup.
        backed_up = {name: len(_messages(report.path, name)) for name in names}
        deadline = time.monotonic() + 60
        while any(len(_messages(path, name)) <= backed_up[name] for name in names):
            assert time.monotonic() < deadline, "the writers stopped appending"
            time.sleep(0.05)
    finally:
        stop.touch()
        totals = [int(worker.communicate(timeout=60)[0]) for worker in workers]
    assert all(running), "the backup must be taken while every writer is still appending"
    assert stat.S_IMODE(report.path.stat().st_mode) == 0o600
    connection = sqlite3.connect(report.path)
    assert connection.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert connection.execute("PRAGMA journal_mode").fetchone() == ("delete",)
    counters = dict(connection.execute("SELECT id, message_count FROM sessions"))
    connection.close()
    for name, total in zip(names, totals, strict=True):
        held = _messages(report.path, name)
        assert held == [f"{name}-{i}" for i in range(len(held))], f"{name}: not a prefix"
        assert counters[name] == len(held), f"{name}: counter and rows from different commits"
        assert 20 <= len(held) < total, f"{name}: the backup is not of a moment mid-run"
    assert report.messages == sum(len(_messages(report.path, name)) for name in names)
    assert not Path(f"{report.path}-wal").exists() and not Path(f"{report.path}-journal").exists()


@pytest.mark.sqlite_only("backup files of a SQLite store")
def test_rotation_keeps_the_newest_n_and_nothing_else_is_touched(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    db = SessionDB(path)
    db.create_session("s1", "cli")
    directory = tmp_path / "backups"
    directory.mkdir()
    unrelated = directory / "notes.txt"
    unrelated.write_text("mine")
    other_store = directory / "other-20200101T000000.000000Z.db"
    other_store.write_text("a backup of another file")
    made = []
    for number in range(5):
        db.append_message("s1", "user", f"m{number}")
        made.append(backup(path, directory, keep=2).path)
    db.close()
    assert backups_in(directory, "state") == made[-2:]
    assert unrelated.read_text() == "mine" and other_store.exists()
    newest = sqlite3.connect(made[-1])
    assert newest.execute("SELECT COUNT(*) FROM messages").fetchone() == (5,)
    newest.close()
    assert [p for p in directory.iterdir() if p.name.startswith(".")] == []


@pytest.mark.sqlite_only("backup files of a SQLite store")
def test_the_default_place_is_hermes_home_and_a_stale_partial_is_cleared(
    tmp_path: Path, _isolated_home: Path
) -> None:
    path = tmp_path / "state.db"
    SessionDB(path).close()
    backups = _isolated_home / "backups"
    backups.mkdir(parents=True)
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    stale = backups / f".state-20200101T000000.000000Z.{dead.stdout.strip()}.partial"
    stale.write_bytes(b"half a copy")
    report = backup(path)
    assert report.path.parent == backups
    assert not stale.exists()
    fresh = backup(path, tmp_path / "new" / "place")
    assert stat.S_IMODE(fresh.path.parent.stat().st_mode) == 0o700


@pytest.mark.sqlite_only("damaged pages of a SQLite file")
def test_a_damaged_source_is_refused_and_older_backups_are_kept(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    db = SessionDB(path)
    db.create_session("s1", "cli")
    db.append_messages("s1", [{"role": "user", "content": "x" * 500} for _ in range(50)])
    db.close()
    good = backup(path, tmp_path / "backups", keep=1).path
    connection = sqlite3.connect(path)
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    connection.close()
    overwrite_pages(path, pages_of(path, ["messages"]), seed=5)
    with pytest.raises(BackupError, match="hermes-store recover"):
        backup(path, tmp_path / "backups", keep=1)
    assert backups_in(tmp_path / "backups", "state") == [good]


def test_bad_arguments_and_postgresql_are_said_clearly(store_url: str, tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="keep"):
        backup(store_url, tmp_path / "b", keep=0)
    if store_url.startswith("postgresql"):
        with pytest.raises(BackupError, match="pg_dump"):
            backup(store_url, tmp_path / "b")
        return
    with pytest.raises(BackupError, match="no database file"):
        backup(tmp_path / "missing.db", tmp_path / "b")
    assert not (tmp_path / "missing.db").exists()
    (tmp_path / "file").write_text("x")
    SessionDB(store_url).close()
    with pytest.raises(BackupError, match="not a directory"):
        backup(store_url, tmp_path / "file")
