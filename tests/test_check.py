"""``check`` finds miscounted sessions and a stale FTS index, and repairs both."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from hermes_store import SessionDB
from hermes_store.check import check


def _populated(db_path: Path) -> SessionDB:
    db = SessionDB(db_path)
    db.create_session("s1", "cli")
    db.append_message("s1", "user", "alpha bravo")
    db.append_message("s1", "assistant", "charlie", tool_calls=[{"id": "1"}, {"id": "2"}])
    db.create_session("s2", "cli")
    db.append_message("s2", "user", "delta echo")
    return db


def test_healthy_store_reports_ok(db_path: Path) -> None:
    db = _populated(db_path)
    report = check(db.store)
    assert report.ok
    assert (report.integrity, report.fts, report.miscounted) == ([], None, [])
    db.close()


def test_miscounted_sessions_are_found_and_repaired(db_path: Path) -> None:
    db = _populated(db_path)
    raw = sqlite3.connect(db_path)
    raw.execute("UPDATE sessions SET message_count = 7, tool_call_count = 0 WHERE id = 's1'")
    raw.commit()
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
    raw.close()
    db.close()


def test_stale_fts_index_is_found_and_rebuilt(db_path: Path) -> None:
    db = _populated(db_path)
    raw = sqlite3.connect(db_path)
    # Change content behind the triggers' back: the index no longer matches the table.
    raw.execute("DROP TRIGGER messages_fts_update")
    raw.execute("UPDATE messages SET content = 'zulu yankee' WHERE content = 'alpha bravo'")
    raw.commit()
    report = check(db.store)
    assert report.fts is not None and not report.ok
    repaired = check(db.store, repair=True)
    assert repaired.rebuilt_fts and repaired.ok
    assert check(db.store).fts is None
    assert [hit["session_id"] for hit in db.search_messages("zulu")] == ["s1"]
    assert db.search_messages("alpha") == []
    raw.close()
    db.close()
