"""``hermes-store optimize`` on real files: space given back after a prune, nothing broken.

The command runs in a subprocess, as a user runs it; the file is built and
pruned with the library, then looked at with plain ``sqlite3``.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from hermes_store import SessionDB
from hermes_store.backends.sqlite.library import driver as sqlite3
from tests.support.paths import REPO, SUPPORT

pytestmark = pytest.mark.sqlite_only("VACUUM and FTS5 segments are SQLite's")

NOW = 1_796_000_000.0
DAY = 86_400.0
WORDS = [f"word{n}" for n in range(400)] + ["nebula", "kubernetes", "部署服务端"]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k != "HERMES_STORE_URL"}
    environment.update(
        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        NO_COLOR="1",
    )
    return subprocess.run(
        [sys.executable, "-m", "hermes_store.cli", *args],
        capture_output=True,
        text=True,
        env=environment,
        timeout=300,
    )


def _pruned_file(path: Path) -> None:
    """40 sessions of 40 messages; the 32 oldest pruned (what a prune leaves behind)."""
    rng = random.Random(19)
    clock = {"now": NOW - 50 * DAY}
    with SessionDB(path, clock=lambda: clock["now"]) as db:
        for number in range(40):
            clock["now"] = NOW - (50 - number) * DAY
            session_id = f"s{number:02d}"
            db.create_session(session_id, "cli")
            db.append_messages(
                session_id,
                [
                    {"role": "user", "content": " ".join(rng.choices(WORDS, k=80))}
                    for _ in range(40)
                ],
            )
            db.end_session(session_id, "done")
    with SessionDB(path, clock=lambda: NOW) as db:
        assert db.prune_sessions(older_than_days=18) == 32


def _size(path: Path) -> int:
    wal = Path(f"{path}-wal")
    return path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)


def _sound(path: Path) -> None:
    connection = sqlite3.connect(path)
    try:
        assert connection.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        for name in ("messages_fts", "messages_fts_trigram"):
            connection.execute(f"INSERT INTO {name}({name}, rank) VALUES ('integrity-check', 1)")
        assert connection.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    finally:
        connection.close()


def test_optimize_gives_the_space_of_pruned_messages_back(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    _pruned_file(path)
    before = _size(path)
    with SessionDB(path) as db:
        hits = {m["id"] for m in db.search_messages("nebula", limit=1000)}
    assert hits

    done = _cli("optimize", "--db", str(path), "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)

    assert [step["name"] for step in report["steps"]] == [
        "FTS optimize messages_fts",
        "FTS optimize messages_fts_trigram",
        "VACUUM",
    ]
    after = _size(path)
    assert report["before_bytes"] <= before  # measured after a checkpoint
    assert report["after_bytes"] == after
    assert report["given_back_bytes"] > report["before_bytes"] * 0.5  # most rows were pruned
    assert report["steps"][-1]["free_bytes"] == 0
    _sound(path)
    with SessionDB(path) as db:  # the same answers, on the same ids
        assert {m["id"] for m in db.search_messages("nebula", limit=1000)} == hits
        assert len(db.search_messages("部署服务端", limit=1000)) > 0
        assert db.message_count() == 8 * 40


def test_without_vacuum_only_the_indexes_are_merged(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    _pruned_file(path)
    done = _cli("optimize", "--no-vacuum", "--db", str(path))
    assert done.returncode == 0, done.stderr
    assert "FTS optimize messages_fts:" in done.stdout and "VACUUM" not in done.stdout
    assert "given back" in done.stdout
    _sound(path)


def test_a_writer_holding_the_lock_past_the_patience_stops_it_cleanly(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    _pruned_file(path)
    holder = subprocess.Popen(
        [sys.executable, str(SUPPORT / "lock_holder.py"), str(path), "30"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        done = _cli("optimize", "--db", str(path), "--patience", "0.3")
    finally:
        holder.kill()
        holder.wait()
    assert done.returncode == 1
    assert "locked" in done.stderr and "Traceback" not in done.stderr
    _sound(path)
