"""A write unit whose COMMIT fails leaves the file and the counters as they were.

A unit of work commits its own transaction on the driver (the path every
single-message append takes). SQLite can refuse a COMMIT itself: a deferred
foreign key another program's trigger left broken is checked only then. The
unit must roll back, raise the driver's error as the store's other
statements refused by another program do (SQLAlchemy's class), and leave the thread's kept
connection outside any transaction, so that the next append works.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy.exc import IntegrityError

from hermes_store import SessionDB
from hermes_store.backends.sqlite.library import driver as sqlite3
from tests.support.upstream_schema import build_upstream_db

pytestmark = pytest.mark.sqlite_only("a COMMIT SQLite itself refuses (a deferred foreign key)")

# Another program's table and trigger: every message row also writes a row whose
# deferred reference points nowhere unless the message's content says "fine".
_BROKEN_AT_COMMIT = """
CREATE TABLE audit_parent (id INTEGER PRIMARY KEY);
CREATE TABLE audit (
    id INTEGER PRIMARY KEY,
    parent INTEGER REFERENCES audit_parent(id) DEFERRABLE INITIALLY DEFERRED
);
CREATE TRIGGER audit_message AFTER INSERT ON messages
WHEN NEW.content IS NOT 'fine'
BEGIN
    INSERT INTO audit (parent) VALUES (-1);
END;
"""


def _file(tmp_path: Path, kind: str) -> Path:
    path = tmp_path / "state.db"
    if kind == "head":
        with SessionDB(path) as db:
            db.create_session("s1", "cli")
    else:
        build_upstream_db(path, int(kind.removeprefix("agent v")))
        with SessionDB(path) as db:
            db.create_session("s1", "cli")
    with sqlite3.connect(path) as raw:
        raw.executescript(_BROKEN_AT_COMMIT)
    raw.close()
    return path


def _as_stored(path: Path) -> tuple[object, ...]:
    with sqlite3.connect(path) as raw:
        messages = raw.execute("SELECT COUNT(*), MAX(id) FROM messages").fetchone()
        counters = raw.execute(
            "SELECT message_count, tool_call_count FROM sessions WHERE id = 's1'"
        ).fetchone()
        audit = raw.execute("SELECT COUNT(*) FROM audit").fetchone()
    raw.close()
    return messages, counters, audit


@pytest.mark.parametrize("kind", ["head", "agent v10", "agent v25"])
def test_a_commit_sqlite_refuses_leaves_everything_as_it_was(tmp_path: Path, kind: str) -> None:
    path = _file(tmp_path, kind)
    with SessionDB(path) as db:
        db.append_message("s1", "user", content="fine")
        before = _as_stored(path)
        with pytest.raises(IntegrityError, match="FOREIGN KEY"):
            db.append_message("s1", "user", content="refused at commit", tool_calls=[{"id": "c"}])
        assert _as_stored(path) == before
        # The kept connection is out of the failed transaction: the next append works.
        kept = db.append_message("s1", "assistant", content="fine")
        assert db.message_count("s1") == before[1][0] + 1  # type: ignore[index]
        assert [m["id"] for m in db.get_messages("s1")][-1] == kept
