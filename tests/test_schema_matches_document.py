"""A database built by `alembic upgrade head` is the documented v6 schema.

Column *order* may differ and legitimately does: ALTER TABLE appends, so on a
migrated file ``title`` (v3) comes before the billing columns (v5), while the
document lists it last. Everything else is compared exactly: types, NOT NULL,
defaults, primary keys, foreign keys, indexes (and their SQL) and triggers.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine

from hermes_store import Store
from hermes_store.migrate import alembic_config, downgrade
from hermes_store.models import Base
from tests.legacy_files import DOCUMENTED_V6_DDL

TABLES = ("sessions", "messages", "schema_version")


def _normalized(sql: str | None) -> str:
    text = re.sub(r"\s+", " ", sql or "").strip()
    return re.sub(r"\s*([(),])\s*", r"\1", text).replace("IF NOT EXISTS ", "")


def _schema(path: Path) -> dict[str, object]:
    connection = sqlite3.connect(path)
    info = {}
    for table in TABLES:
        columns = connection.execute(f"PRAGMA table_info({table})").fetchall()
        info[f"{table}.columns"] = {c[1]: (c[2], c[3], c[4], c[5]) for c in columns}
        info[f"{table}.fks"] = sorted(
            row[2:5] for row in connection.execute(f"PRAGMA foreign_key_list({table})")
        )
        indexes = connection.execute(f"PRAGMA index_list({table})").fetchall()
        info[f"{table}.indexes"] = sorted((i[1], i[2], i[4]) for i in indexes)
    info["objects"] = sorted(
        (kind, name, _normalized(sql))
        for kind, name, sql in connection.execute(
            "SELECT type, name, sql FROM sqlite_master "
            "WHERE (type IN ('index', 'trigger') AND name NOT LIKE 'sqlite_autoindex%') "
            "OR name IN ('messages_fts')"
        )
    )
    connection.close()
    return info


def _documented(path: Path) -> Path:
    connection = sqlite3.connect(path)
    connection.executescript(DOCUMENTED_V6_DDL)
    connection.close()
    return path


def _migrated_to_v6(path: Path) -> Path:
    """Alembic at revision 0006: the document's version. (0007 adds the CJK index.)"""
    store = Store(path, migrate=False)
    with store.engine.begin() as connection:
        command.upgrade(alembic_config(connection), "0006")
    store.close()
    return path


def test_alembic_0006_equals_the_documented_ddl(tmp_path: Path) -> None:
    documented = _schema(_documented(tmp_path / "documented.db"))
    migrated = _schema(_migrated_to_v6(tmp_path / "migrated.db"))
    assert migrated.keys() == documented.keys()
    for key in documented:
        assert migrated[key] == documented[key], key


def test_documented_schema_has_what_the_spec_lists(tmp_path: Path) -> None:
    """Guards the comparison itself: the reference really holds the documented objects."""
    documented = _schema(_documented(tmp_path / "documented.db"))
    names = {name for _kind, name, _sql in documented["objects"]}  # type: ignore[union-attr]
    assert {
        "idx_sessions_source",
        "idx_sessions_parent",
        "idx_sessions_started",
        "idx_sessions_title_unique",
        "idx_messages_session",
        "messages_fts",
        "messages_fts_insert",
        "messages_fts_delete",
        "messages_fts_update",
    } <= names
    assert ("idx_sessions_title_unique", 1, 1) in documented["sessions.indexes"]  # type: ignore[operator]
    assert documented["messages.fks"] == [("sessions", "session_id", "id")]
    assert len(documented["sessions.columns"]) == 26  # type: ignore[arg-type]


def _mapped_by_models(name: str | None, type_: str, _parent: object) -> bool:
    """The FTS5 table (and its shadow tables) and Alembic's own table are not models.

    ``idx_sessions_started`` is left to the SQL comparison above: SQLite's
    reflection drops the ``DESC`` of an index column, so autogenerate cannot
    compare it, while its SQL in sqlite_master is compared exactly.
    """
    if type_ == "index" and name == "idx_sessions_started":
        return False
    return not (type_ == "table" and name and name.startswith(("messages_fts", "alembic_")))


def test_models_agree_with_the_migrated_database(tmp_path: Path) -> None:
    Store(tmp_path / "migrated.db").close()
    engine = create_engine(f"sqlite:///{tmp_path / 'migrated.db'}")
    with engine.connect() as connection:
        context = MigrationContext.configure(
            connection,
            opts={
                "compare_type": True,
                "compare_server_default": True,
                "include_name": _mapped_by_models,
            },
        )
        differences = compare_metadata(context, Base.metadata)
    engine.dispose()

    # messages.id is the rowid alias: SQLite reports it nullable, it never is,
    # and the model says NOT NULL (see models.Message.id).
    def is_rowid_alias(diff: object) -> bool:
        return isinstance(diff, list) and [op[:4] for op in diff] == [
            ("modify_nullable", None, "messages", "id")
        ]

    assert [d for d in differences if not is_rowid_alias(d)] == []


def test_messages_id_is_autoincrement(tmp_path: Path) -> None:
    Store(tmp_path / "migrated.db").close()
    connection = sqlite3.connect(tmp_path / "migrated.db")
    (sql,) = connection.execute("SELECT sql FROM sqlite_master WHERE name = 'messages'").fetchone()
    assert "AUTOINCREMENT" in sql
    connection.close()


TRIGRAM_OBJECTS = {
    ("table", "messages_fts_trigram"),
    ("trigger", "messages_fts_trigram_insert"),
    ("trigger", "messages_fts_trigram_delete"),
    ("trigger", "messages_fts_trigram_update"),
}


def _objects(path: Path) -> set[tuple[str, str]]:
    connection = sqlite3.connect(path)
    names = connection.execute(
        "SELECT type, name FROM sqlite_master WHERE name NOT LIKE 'messages_fts_trigram_%' "
        "OR type = 'trigger'"
    ).fetchall()
    connection.close()
    return set(names)


def test_version_7_adds_the_trigram_index_and_its_downgrade_removes_exactly_that(
    tmp_path: Path,
) -> None:
    path = _migrated_to_v6(tmp_path / "state.db")
    at_six = _schema(path)
    objects_at_six = _objects(path)
    store = Store(path)  # to head: 0007
    assert _objects(path) - objects_at_six == TRIGRAM_OBJECTS
    downgrade(store.engine, "0006")
    store.close()
    assert _objects(path) == objects_at_six
    assert _schema(path) == at_six
