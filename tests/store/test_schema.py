"""The Alembic chain builds the design document's schema, and the models describe it.

Database A is the documented v6 DDL run by plain ``sqlite3``; database B is
built by our migrations (revision 0006 is schema version 6). They are
compared through SQLite's own catalog -- PRAGMA table_info, foreign_key_list,
index_list/index_xinfo and the stored SQL of indexes, triggers and the FTS5
table -- not through SQLAlchemy, so a reflection blind spot cannot hide a
difference.

Column ORDER legitimately differs: ALTER TABLE appends, so on a migrated file
``sessions.title`` (added by v3) comes before the billing columns (added by
v5), while the document, written at v6, lists title last. Columns are
therefore compared as a mapping by name, and the order is checked separately
to be exactly that one difference.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy.engine import Engine

from hermes_store.backends import create_store_engine
from hermes_store.backends.location import sqlite_url
from hermes_store.backends.sqlite.library import driver as sqlite3
from hermes_store.schema.migrate import upgrade, upgrade_to_head
from hermes_store.schema.models import Base
from tests.support.legacy_schema import (
    DOCUMENTED_FTS_DDL,
    DOCUMENTED_V6_DDL,
    LEGACY_VERSIONS,
    build_legacy_db,
)
from tests.support.paths import REPO

pytestmark = pytest.mark.sqlite_only(
    "compares with the design document's SQLite DDL; PostgreSQL: test_pg_schema.py"
)

V6_REVISION = "0006"
DOCUMENTED_TABLES = ("schema_version", "sessions", "messages")


def normalized_sql(sql: str | None) -> str:
    """SQL text with layout taken out: whitespace folded, none around punctuation."""
    folded = re.sub(r"\s+", " ", sql or "").strip().rstrip(";").strip()
    folded = re.sub(r"\s*([(),;=])\s*", r"\1", folded)
    return re.sub(r"\bIF NOT EXISTS ", "", folded, flags=re.IGNORECASE)


def _columns(connection: sqlite3.Connection, table: str) -> dict[str, tuple[Any, ...]]:
    return {
        name: (type_, notnull, default, pk)
        for _cid, name, type_, notnull, default, pk in connection.execute(
            f"PRAGMA table_info({table})"
        )
    }


def _foreign_keys(connection: sqlite3.Connection, table: str) -> list[tuple[Any, ...]]:
    # (referenced table, from, to, on_update, on_delete, match); id/seq are positional noise.
    return sorted(row[2:] for row in connection.execute(f"PRAGMA foreign_key_list({table})"))


def _indexes(connection: sqlite3.Connection, table: str) -> dict[str, dict[str, Any]]:
    found = {}
    for _seq, name, unique, origin, partial in connection.execute(f"PRAGMA index_list({table})"):
        keys = [
            (column, desc, collation)
            for _rank, _cid, column, desc, collation, key in connection.execute(
                f"PRAGMA index_xinfo({name})"
            )
            if key
        ]
        (sql,) = connection.execute(
            "SELECT sql FROM sqlite_master WHERE type = 'index' AND name = ?", (name,)
        ).fetchone()
        found[name] = {
            "unique": unique,
            "origin": origin,
            "partial": partial,
            "keys": keys,
            "sql": normalized_sql(sql) if sql else None,  # autoindexes have no SQL
        }
    return found


def describe(path: Path) -> dict[str, Any]:
    """Everything about the documented objects that SQLite records, layout-free."""
    connection = sqlite3.connect(path)
    try:
        objects = {
            (kind, name): (table, sql)
            for kind, name, table, sql in connection.execute(
                "SELECT type, name, tbl_name, sql FROM sqlite_master"
            )
        }
        schema: dict[str, Any] = {
            "tables": sorted(
                name for kind, name in objects if kind == "table" and name != "alembic_version"
            ),
            "triggers": {
                name: (objects[kind, name][0], normalized_sql(objects[kind, name][1]))
                for kind, name in objects
                if kind == "trigger"
            },
            "messages_fts": normalized_sql(objects["table", "messages_fts"][1]),
            # PRAGMA table_info does not show AUTOINCREMENT; the stored SQL does.
            "messages_autoincrement": "AUTOINCREMENT" in objects["table", "messages"][1].upper(),
        }
        for table in DOCUMENTED_TABLES:
            schema[f"{table}.columns"] = _columns(connection, table)
            schema[f"{table}.foreign_keys"] = _foreign_keys(connection, table)
            schema[f"{table}.indexes"] = _indexes(connection, table)
        return schema
    finally:
        connection.close()


def column_order(path: Path, table: str) -> list[str]:
    connection = sqlite3.connect(path)
    try:
        return [row[1] for row in connection.execute(f"PRAGMA table_info({table})")]
    finally:
        connection.close()


@pytest.fixture
def documented_db(tmp_path: Path) -> Path:
    """Database A: the design document's DDL, run the way the old v6 code ran it."""
    path = tmp_path / "documented.db"
    connection = sqlite3.connect(path)
    connection.executescript(DOCUMENTED_V6_DDL + DOCUMENTED_FTS_DDL)
    connection.execute("INSERT INTO schema_version (version) VALUES (6)")
    connection.commit()
    connection.close()
    return path


@pytest.fixture
def engine_for(tmp_path: Path) -> Iterator[Any]:
    engines: list[Engine] = []

    def make(name: str) -> tuple[Path, Engine]:
        path = tmp_path / name
        engine = create_store_engine(sqlite_url(path))
        engines.append(engine)
        return path, engine

    yield make
    for engine in engines:
        engine.dispose()


@pytest.fixture
def migrated_db(engine_for: Any) -> Path:
    """Database B: an empty file brought to revision 0006 by the Alembic chain."""
    path, engine = engine_for("migrated.db")
    upgrade(engine, V6_REVISION)
    engine.dispose()
    return path


def test_migrated_schema_equals_the_documented_ddl(documented_db: Path, migrated_db: Path) -> None:
    documented = describe(documented_db)
    migrated = describe(migrated_db)
    assert migrated.keys() == documented.keys()
    for key in documented:
        assert migrated[key] == documented[key], key


def test_documented_objects_are_what_the_document_says(documented_db: Path) -> None:
    """Guard the comparison itself: A must hold the objects the brief enumerates."""
    schema = describe(documented_db)
    assert set(schema["triggers"]) == {
        "messages_fts_insert",
        "messages_fts_delete",
        "messages_fts_update",
    }
    assert {"messages_fts", "sqlite_sequence"} <= set(schema["tables"])
    assert schema["messages_autoincrement"]
    assert schema["sessions.indexes"]["idx_sessions_title_unique"]["unique"] == 1
    assert schema["sessions.indexes"]["idx_sessions_title_unique"]["partial"] == 1
    assert schema["sessions.indexes"]["idx_sessions_started"]["keys"] == [
        ("started_at", 1, "BINARY")
    ]
    assert schema["sessions.foreign_keys"] == [
        ("sessions", "parent_session_id", "id", "NO ACTION", "NO ACTION", "NONE")
    ]
    assert schema["schema_version.columns"] == {"version": ("INTEGER", 1, None, 0)}


def test_column_order_differs_only_by_where_title_sits(
    documented_db: Path, migrated_db: Path
) -> None:
    documented = column_order(documented_db, "sessions")
    migrated = column_order(migrated_db, "sessions")
    assert documented[-1] == "title"
    appended_at_v3 = documented[:14] + ["title"] + documented[14:-1]
    assert migrated == appended_at_v3
    # messages grew in document order (v2 finish_reason, then v6's three), so it matches.
    assert column_order(migrated_db, "messages") == column_order(documented_db, "messages")


@pytest.mark.parametrize("version", LEGACY_VERSIONS)
def test_every_legacy_file_upgraded_to_v6_equals_the_documented_ddl(
    documented_db: Path, engine_for: Any, version: int
) -> None:
    path, engine = engine_for(f"legacy-v{version}.db")
    build_legacy_db(path, version)
    upgrade(engine, V6_REVISION)
    engine.dispose()
    assert describe(path) == describe(documented_db)


def test_head_keeps_every_documented_object_unchanged(documented_db: Path, engine_for: Any) -> None:
    """Revisions after 0006 may add objects, never alter the documented ones."""
    path, engine = engine_for("head.db")
    upgrade_to_head(engine)
    engine.dispose()
    documented = describe(documented_db)
    head = describe(path)
    for key, value in documented.items():
        if key == "tables":
            assert set(value) <= set(head[key])
        # 0010 adds indexes beside the sessions ones, 0013 one beside the messages ones
        elif key in ("triggers", "sessions.indexes", "messages.indexes"):
            assert {name: head[key].get(name) for name in value} == value, key
        elif key == "sessions.columns":
            # 0016 adds the agent's archived and pinned after the documented columns.
            assert {name: head[key].get(name) for name in value} == value, key
            assert set(head[key]) - set(value) == {"archived", "pinned"}
        else:
            assert head[key] == value, key


# Indexes not compared here: ones Alembic cannot compare (a DESC key), whose DDL is checked
# below, and revision 0010's, which the documented (v6) files compared here do not have (the
# models do not carry its idx_sessions_total_tokens at all: its order is spelled per
# backend in the revision).
_NOT_COMPARED_INDEXES = frozenset(
    {
        "idx_sessions_started",
        "idx_sessions_listing",
        "idx_sessions_source_listing",
        "idx_sessions_title_family",
        "idx_sessions_usage",
        "idx_sessions_total_tokens",
        "idx_messages_search_filter",  # revision 0013's, not in the models: SQLite only
    }
)


# Tables the models deliberately do not map: FTS5 (virtual, and its shadow
# tables), Alembic's bookkeeping, and SQLite's AUTOINCREMENT counter.
def _mapped_only(obj: Any, name: str | None, type_: str, reflected: bool, _compare_to: Any) -> bool:
    if type_ == "table" and reflected and name not in Base.metadata.tables:
        return False
    return not (type_ == "index" and name in _NOT_COMPARED_INDEXES)


@pytest.mark.parametrize("which", ["migrated", "documented"])
def test_models_agree_with_the_database(which: str, documented_db: Path, migrated_db: Path) -> None:
    path = migrated_db if which == "migrated" else documented_db
    engine = create_store_engine(sqlite_url(path))
    try:
        with engine.connect() as connection:
            context = MigrationContext.configure(
                connection,
                opts={
                    "compare_type": True,
                    "compare_server_default": True,
                    "include_object": _mapped_only,
                },
            )
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the expression index, checked below
                diffs = compare_metadata(context, Base.metadata)
    finally:
        engine.dispose()
    # ``INTEGER PRIMARY KEY`` is the rowid alias: SQLite never stores NULL in
    # it, but the documented DDL says no NOT NULL, so reflection calls it
    # nullable while the model (rightly) says NOT NULL. The one tolerated diff.
    rowid_nullability = [
        diff
        for diff in diffs
        if isinstance(diff, list)
        and diff[0][0] == "modify_nullable"
        and diff[0][2:4] == ("messages", "id")
    ]
    assert [diff for diff in diffs if diff not in rowid_nullability] == []


def test_models_spell_the_expression_index_as_documented(documented_db: Path) -> None:
    """Alembic cannot compare ``started_at DESC``; compare its compiled DDL instead."""
    from sqlalchemy.schema import CreateIndex

    engine = create_store_engine(sqlite_url(documented_db))
    try:
        (index,) = (
            i for i in Base.metadata.tables["sessions"].indexes if i.name == "idx_sessions_started"
        )
        compiled = str(CreateIndex(index).compile(dialect=engine.dialect))
    finally:
        engine.dispose()
    documented = describe(documented_db)["sessions.indexes"]["idx_sessions_started"]["sql"]
    assert normalized_sql(compiled) == documented


@pytest.mark.parametrize(
    "name",
    [
        "idx_sessions_listing",
        "idx_sessions_source_listing",
        "idx_sessions_title_family",
        "idx_sessions_usage",
    ],
)
def test_models_spell_revision_0010s_indexes_as_the_revision_builds_them(
    name: str, engine_for: Any
) -> None:
    from sqlalchemy.schema import CreateIndex

    path, engine = engine_for("head.db")
    try:
        upgrade_to_head(engine)
        (index,) = (i for i in Base.metadata.tables["sessions"].indexes if i.name == name)
        compiled = str(CreateIndex(index).compile(dialect=engine.dialect))
    finally:
        engine.dispose()
    assert normalized_sql(compiled) == describe(path)["sessions.indexes"][name]["sql"]


def test_offline_sql_builds_the_documented_schema(tmp_path: Path, documented_db: Path) -> None:
    """``alembic upgrade 0006 --sql`` (no database needed) emits the same schema."""
    repo = REPO
    environment = {k: v for k, v in os.environ.items() if k != "HERMES_STORE_URL"}
    environment["HERMES_HOME"] = str(tmp_path / "unused-home")
    target = tmp_path / "offline.db"
    result = subprocess.run(
        [sys.executable, "-m", "alembic", "-x", f"url=sqlite:///{target}"]
        + ["upgrade", V6_REVISION, "--sql"],
        cwd=repo,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert not target.exists(), "offline mode must not open the database"
    connection = sqlite3.connect(target)
    connection.executescript(result.stdout)
    connection.close()
    assert describe(target) == describe(documented_db)
