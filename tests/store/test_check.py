"""``check`` finds miscounted sessions and a stale search index, and repairs both."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from hermes_store import SessionDB
from hermes_store.backends.sqlite.library import driver as sqlite3
from hermes_store.tools.check import check


def _populated(target: Any) -> SessionDB:
    db = SessionDB(target)
    db.create_session("s1", "cli")
    db.append_message("s1", "user", "alpha bravo")
    db.append_message("s1", "assistant", "charlie", tool_calls=[{"id": "1"}, {"id": "2"}])
    db.create_session("s2", "cli")
    db.append_message("s2", "user", "delta echo")
    return db


def _behind_its_back(db: SessionDB, sql: str) -> None:
    """Change the database on a connection of its own, as another program would."""
    with db.store.engine.begin() as connection:
        connection.execute(text(sql))


def test_healthy_store_reports_ok(store_url: str) -> None:
    db = _populated(store_url)
    report = check(db.store)
    assert report.ok
    assert (report.integrity, report.foreign_keys, report.fts, report.miscounted) == (
        [],
        [],
        None,
        [],
    )
    db.close()


def test_miscounted_sessions_are_found_and_repaired(store_url: str) -> None:
    db = _populated(store_url)
    _behind_its_back(
        db, "UPDATE sessions SET message_count = 7, tool_call_count = 0 WHERE id = 's1'"
    )
    report = check(db.store)
    assert not report.ok
    assert [(r["id"], r["real_messages"], r["real_tool_calls"]) for r in report.miscounted] == [
        ("s1", 2, 2)
    ]
    assert db.get_session("s1")["message_count"] == 7, "a plain check must not change anything"
    repaired = check(db.store, repair=True)
    assert repaired.ok and repaired.repaired_counters == 1
    session = db.get_session("s1")
    assert (session["message_count"], session["tool_call_count"]) == (2, 2)
    assert check(db.store).miscounted == []
    db.close()


@pytest.mark.sqlite_only("FTS5 triggers and their integrity-check are SQLite's")
def test_stale_fts_index_is_found_and_rebuilt(db_path: Path) -> None:
    db = _populated(db_path)
    raw = sqlite3.connect(db_path)
    # Change content behind the triggers' back: the index no longer matches the table.
    raw.execute("DROP TRIGGER messages_fts_update")
    raw.execute("UPDATE messages SET content = 'zulu yankee' WHERE content = 'alpha bravo'")
    raw.commit()
    report = check(db.store)
    assert report.fts is not None and not report.ok
    assert report.stale_fts == ["messages_fts"] and "stale" in report.fts
    repaired = check(db.store, repair=True)
    assert repaired.rebuilt_fts and repaired.ok
    assert check(db.store).fts is None
    assert [hit["session_id"] for hit in db.search_messages("zulu")] == ["s1"]
    assert db.search_messages("alpha") == []
    raw.close()
    db.close()


def test_missing_postgresql_search_index_is_found_and_rebuilt(pg_url: Any) -> None:
    db = _populated(pg_url)
    _behind_its_back(db, "DROP INDEX idx_messages_fts")
    report = check(db.store)
    assert report.fts is not None and "idx_messages_fts" in report.fts and not report.ok
    repaired = check(db.store, repair=True)
    assert repaired.rebuilt_fts and repaired.ok
    assert check(db.store).fts is None
    assert [hit["session_id"] for hit in db.search_messages("alpha")] == ["s1"]
    db.close()


def test_postgresql_identity_behind_the_ids_is_found_and_moved(pg_url: Any) -> None:
    db = _populated(pg_url)
    _behind_its_back(db, "SELECT setval(pg_get_serial_sequence('messages', 'id'), 1)")
    report = check(db.store)
    assert not report.ok and "identity" in report.integrity[0]
    repaired = check(db.store, repair=True)
    assert repaired.ok and repaired.repaired_identity
    assert check(db.store).integrity == []
    assert db.append_message("s2", "user", "foxtrot") == 4
    db.close()


def _chinese_store(path: Path) -> SessionDB:
    db = SessionDB(path)
    db.create_session("zh", "cli")
    db.append_messages(
        "zh",
        [{"role": "user", "content": f"第{i}次对话：聊天记录记忆断裂的问题"} for i in range(20)],
    )
    assert len(db.search_messages("记忆断裂", limit=50)) == 20
    return db


@pytest.mark.sqlite_only("the FTS5 trigram index and its integrity-check are SQLite's")
@pytest.mark.parametrize("damage", ["delete-all", "one row"])
def test_a_stale_trigram_index_is_reported_as_stale_and_rebuilt(db_path: Path, damage: str) -> None:
    """Before, check(repair=True) said ok=True and Chinese search then found 0 of 20."""
    db = _chinese_store(db_path)
    raw = sqlite3.connect(db_path)
    if damage == "delete-all":
        raw.execute("INSERT INTO messages_fts_trigram(messages_fts_trigram) VALUES ('delete-all')")
    else:
        (rowid, content) = raw.execute("SELECT id, content FROM messages LIMIT 1").fetchone()
        raw.execute(
            "INSERT INTO messages_fts_trigram(messages_fts_trigram, rowid, content) "
            "VALUES ('delete', ?, ?)",
            (rowid, content),
        )
    raw.commit()
    raw.close()
    report = check(db.store)
    assert not report.ok
    assert report.stale_fts == ["messages_fts_trigram"]
    assert report.fts is not None and "messages_fts_trigram" in report.fts
    assert "stale" in report.fts and "malformed" not in report.fts
    repaired = check(db.store, repair=True)
    assert repaired.ok and repaired.rebuilt_fts
    assert check(db.store).fts is None
    assert len(db.search_messages("记忆断裂", limit=50)) == 20
    db.close()


def test_a_text_that_is_not_utf8_is_reported_by_row_and_rewritten(db_path: Path) -> None:
    from tests.store.test_facade import READ_AS, plant_bad_text

    message_id = plant_bad_text(db_path)
    db = SessionDB(db_path)
    report = check(db.store)
    assert not report.ok, "check says ok while a text cannot be decoded"
    assert report.undecodable == [
        {"table": "sessions", "id": "bad", "column": "title"},
        {"table": "messages", "id": message_id, "column": "content"},
    ]
    repaired = check(db.store, repair=True)
    assert repaired.ok and repaired.rewrote_undecodable
    after = check(db.store)
    assert after.ok and after.undecodable == []
    assert db.get_messages("bad")[-1]["content"] == READ_AS
    assert [r["id"] for r in db.search_messages("time")] == [message_id]
    db.close()
    with sqlite3.connect(db_path) as raw:  # the file now holds the replaced text as UTF-8
        (stored,) = raw.execute(
            "SELECT CAST(content AS BLOB) FROM messages WHERE id = ?", (message_id,)
        ).fetchone()
    assert bytes(stored).decode("utf-8") == READ_AS
