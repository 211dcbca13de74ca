"""Old files at every schema version reach head in place, by every route, losing nothing."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from hermes_store import SchemaError, SessionDB, Store
from hermes_store.migrate import (
    HEAD_REVISION,
    HEAD_SCHEMA_VERSION,
    downgrade,
    read_state,
    upgrade_to_head,
)
from tests.legacy_files import build_legacy_file

REPO = Path(__file__).resolve().parent.parent
VERSIONS = range(1, 7)


def _alembic(*args: str, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "alembic", *args],
        cwd=REPO,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout + result.stderr


def _assert_upgraded_intact(path: Path, written: dict[str, list[tuple]]) -> None:
    raw = sqlite3.connect(path)
    assert raw.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert raw.execute("SELECT version FROM schema_version").fetchall() == [(HEAD_SCHEMA_VERSION,)]
    assert raw.execute("SELECT version_num FROM alembic_version").fetchall() == [(HEAD_REVISION,)]
    sessions = raw.execute(
        "SELECT id, source, parent_session_id, started_at, ended_at FROM sessions "
        "ORDER BY started_at"
    ).fetchall()
    assert sessions == written["sessions"]
    messages = raw.execute(
        "SELECT session_id, role, content, timestamp FROM messages ORDER BY id"
    ).fetchall()
    assert messages == written["messages"]
    for index in ("messages_fts", "messages_fts_trigram"):
        raw.execute(f"INSERT INTO {index}({index}) VALUES ('integrity-check')")
    # The trigram index of version 7 was back-filled from the old rows.
    back_filled = raw.execute(
        "SELECT COUNT(*) FROM messages_fts_trigram WHERE messages_fts_trigram MATCH 'bernet'"
    ).fetchone()
    assert back_filled == (3,)
    raw.close()

    db = SessionDB(path)
    assert [s["id"] for s in db.get_ancestors("grandchild")] == ["grandchild", "child", "root"]
    assert {hit["session_id"] for hit in db.search_messages("kubernetes")} == {
        "root",
        "child",
        "grandchild",
    }
    # Triggers still work: a row written after the upgrade is searchable, with new columns.
    db.append_message("child", "assistant", "post upgrade zeppelin", reasoning="why")
    db.set_session_title("child", "After upgrade")
    db.update_token_counts("child", input_tokens=1, estimated_cost_usd=0.5)
    assert [hit["snippet"] for hit in db.search_messages("zeppelin")] == [
        "post upgrade >>>zeppelin<<<"
    ]
    assert db.get_messages("child")[-1]["reasoning"] == "why"
    assert db.get_session("child")["message_count"] == 3
    db.close()


@pytest.mark.parametrize("version", VERSIONS)
def test_open_adopts_and_upgrades_an_old_file(tmp_path: Path, version: int) -> None:
    path = tmp_path / "state.db"
    written = build_legacy_file(path, version)
    Store(path).close()
    _assert_upgraded_intact(path, written)


@pytest.mark.parametrize("version", VERSIONS)
def test_alembic_command_line_upgrades_an_old_file(tmp_path: Path, version: int) -> None:
    path = tmp_path / "state.db"
    written = build_legacy_file(path, version)
    _alembic("-x", f"url=sqlite:///{path}", "upgrade", "head")
    _assert_upgraded_intact(path, written)


def test_alembic_uses_hermes_store_url(tmp_path: Path) -> None:
    path = tmp_path / "elsewhere.db"
    written = build_legacy_file(path, 3)
    _alembic("upgrade", "head", env={"HERMES_STORE_URL": f"sqlite:///{path}"})
    _assert_upgraded_intact(path, written)
    assert f"{HEAD_REVISION} (head)" in _alembic(
        "current", env={"HERMES_STORE_URL": f"sqlite:///{path}"}
    )


def test_alembic_defaults_to_hermes_home(tmp_path: Path) -> None:
    home = tmp_path / "agent-home"
    _alembic("upgrade", "head", env={"HERMES_HOME": str(home)})
    raw = sqlite3.connect(home / "state.db")
    assert raw.execute("SELECT version FROM schema_version").fetchall() == [(HEAD_SCHEMA_VERSION,)]
    raw.close()


def test_partially_migrated_old_file_upgrades(tmp_path: Path) -> None:
    """The old code can crash after ALTER TABLE and before bumping schema_version."""
    path = tmp_path / "state.db"
    written = build_legacy_file(path, 4)
    raw = sqlite3.connect(path)
    raw.execute("ALTER TABLE sessions ADD COLUMN cache_read_tokens INTEGER DEFAULT 0")
    raw.commit()
    raw.close()
    Store(path).close()
    _assert_upgraded_intact(path, written)


def test_downgrade_step_by_step_and_back_keeps_rows_and_search(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    written = build_legacy_file(path, 6)
    store = Store(path)
    upgrade_to_head(store.engine)
    for target in range(HEAD_SCHEMA_VERSION - 1, 0, -1):
        downgrade(store.engine, f"{target:04d}")
        raw = sqlite3.connect(path)
        assert raw.execute("SELECT version FROM schema_version").fetchall() == [(target,)]
        earlier_inserts = HEAD_SCHEMA_VERSION - 1 - target
        assert raw.execute("SELECT COUNT(*) FROM messages").fetchone() == (6 + earlier_inserts,)
        kept = raw.execute(
            "SELECT session_id, role, content, timestamp FROM messages ORDER BY id LIMIT 6"
        ).fetchall()
        assert kept == written["messages"]
        raw.execute(
            "INSERT INTO messages (session_id, role, content, timestamp) "
            f"VALUES ('root', 'user', 'written at version {target} quasar', 2000)"
        )
        raw.commit()
        hits = raw.execute(
            "SELECT COUNT(*) FROM messages_fts WHERE messages_fts MATCH 'quasar'"
        ).fetchone()
        assert hits == (earlier_inserts + 1,), "the FTS triggers must survive each downgrade"
        raw.execute("INSERT INTO messages_fts(messages_fts) VALUES ('integrity-check')")
        (sql,) = raw.execute("SELECT sql FROM sqlite_master WHERE name = 'messages'").fetchone()
        assert "AUTOINCREMENT" in sql
        raw.close()
    downgrade(store.engine, "base")
    raw = sqlite3.connect(path)
    # sqlite_sequence (AUTOINCREMENT's bookkeeping) cannot be dropped; all else is gone.
    tables = {
        name for (name,) in raw.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
    }
    assert tables == {"alembic_version", "sqlite_sequence"}
    raw.close()
    upgrade_to_head(store.engine)
    with store.read() as uow:
        assert read_state(uow.connection) == (HEAD_SCHEMA_VERSION, HEAD_REVISION)
    store.close()


def test_fresh_file_reaches_head_with_alembic(tmp_path: Path) -> None:
    path = tmp_path / "new" / "state.db"
    _alembic("-x", f"url=sqlite:///{path}", "upgrade", "head")
    store = Store(path, migrate=False)
    with store.read() as uow:
        assert read_state(uow.connection) == (HEAD_SCHEMA_VERSION, HEAD_REVISION)
    store.close()


def test_newer_schema_version_is_refused_clearly(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    build_legacy_file(path, 6)
    raw = sqlite3.connect(path)
    raw.execute("UPDATE schema_version SET version = 42")
    raw.commit()
    raw.close()
    with pytest.raises(SchemaError, match="schema_version 42"):
        Store(path)


def _file_digest(path: Path) -> dict[str, str | None]:
    return {
        suffix: hashlib.sha256(Path(f"{path}{suffix}").read_bytes()).hexdigest()
        if Path(f"{path}{suffix}").exists()
        else None
        for suffix in ("", "-wal")
    }


def test_opening_a_current_database_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    Store(path).close()  # migrated; closing the last connection checkpoints the WAL
    before = _file_digest(path)
    mtime = path.stat().st_mtime_ns
    db = SessionDB(path)
    assert db.get_session("nobody") is None
    db.close()
    assert _file_digest(path) == before
    assert path.stat().st_mtime_ns == mtime
