"""Revision 0007 adds exactly the trigram index; its downgrade removes exactly that."""

from __future__ import annotations

from pathlib import Path

import pytest

from hermes_store import SessionDB, Store
from hermes_store.backends.sqlite.library import driver as sqlite3
from hermes_store.schema.migrate import downgrade, upgrade
from tests.support.legacy_schema import build_legacy_db

pytestmark = pytest.mark.sqlite_only("the FTS5 trigram table of revision 0007")

TRIGRAM_OBJECTS = {
    ("table", "messages_fts_trigram"),
    ("trigger", "messages_fts_trigram_insert"),
    ("trigger", "messages_fts_trigram_delete"),
    ("trigger", "messages_fts_trigram_update"),
}


def _catalog(path: Path) -> dict[tuple[str, str], str]:
    """Every schema object but the trigram table's own shadow tables, with its SQL."""
    connection = sqlite3.connect(path)
    rows = connection.execute(
        "SELECT type, name, sql FROM sqlite_master "
        "WHERE name NOT LIKE 'messages_fts_trigram_%' OR type = 'trigger'"
    ).fetchall()
    connection.close()
    return {(kind, name): sql for kind, name, sql in rows}


def test_0007_adds_only_the_trigram_index_and_downgrade_removes_only_that(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.db"
    store = Store(path, migrate=False)
    upgrade(store.engine, "0006")
    at_six = _catalog(path)
    upgrade(store.engine, "0007")
    assert set(_catalog(path)) - set(at_six) == TRIGRAM_OBJECTS
    assert {k: v for k, v in _catalog(path).items() if k in at_six} == at_six
    downgrade(store.engine, "0006")
    assert _catalog(path) == at_six
    raw = sqlite3.connect(path)
    assert raw.execute("SELECT version FROM schema_version").fetchall() == [(6,)]
    raw.close()
    store.close()


def test_0007_back_fills_the_trigram_index_from_existing_rows(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    build_legacy_db(path, 6)
    with SessionDB(path) as db:  # adopts the old file and upgrades it to 0007
        raw = sqlite3.connect(path)
        raw.execute(
            "INSERT INTO messages_fts_trigram(messages_fts_trigram) VALUES ('integrity-check')"
        )
        old_rows = raw.execute(
            "SELECT COUNT(*) FROM messages_fts_trigram WHERE messages_fts_trigram MATCH 'eppeli'"
        ).fetchone()
        raw.close()
        assert old_rows == (2,)  # both "zeppelin" messages of the old file
        assert {h["session_id"] for h in db.search_messages("eppeli")} == {"sess_grandchild"}
