"""The Alembic chain on PostgreSQL: empty database to head, the models' schema, and back.

Every test gets a brand-new empty database (``pg_fresh_url``); the SQLite
side of the same revisions is covered by test_migrations.py and test_schema.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.engine import URL, Engine
from sqlalchemy.pool import NullPool

from hermes_store import SessionDB, Store
from hermes_store.backends.postgresql import totals as pg_totals
from hermes_store.errors import SchemaError
from hermes_store.schema.migrate import (
    HEAD_REVISION,
    HEAD_SCHEMA_VERSION,
    downgrade,
    is_current,
    revision_for_version,
    upgrade_to_head,
)
from hermes_store.schema.models import Base
from tests.store.test_migrations import run_alembic

SEARCH_INDEXES = {"idx_messages_fts", "idx_messages_content_trgm", "idx_messages_role"}
"""PostgreSQL-only indexes of revisions 0007/0014: the models do not carry them."""
TOTAL_TOKENS_INDEX = "idx_sessions_total_tokens"
"""Revision 0010's index on input_tokens + output_tokens, spelled per backend there."""
ROOT_INDEXES = {"idx_sessions_roots_listing", "idx_sessions_roots_source_listing"}
"""Revision 0011's partial indexes of root sessions: in the revision, not (yet) in the models."""
KEEPING_COLUMNS = {("sessions", "archived"), ("sessions", "pinned")}
KEEPING_INDEXES = {
    "idx_sessions_live_roots_listing",
    "idx_sessions_live_roots_source_listing",
    "idx_sessions_archived",
    "idx_sessions_pinned",
}
"""Revision 0016's partial indexes for archived and pinned sessions: not in the models."""
TITLE_PATTERN_INDEX = "idx_sessions_title_pattern"
"""Revision 0015's text_pattern_ops index of titles: PostgreSQL only, not in the models."""
PAIR_TABLE = "messages_cjk_bigrams"
"""Revision 0018's CJK pair index on PostgreSQL (SQLite's is 0009's): not in the models."""
VECTOR_COLUMN = "content_tsv"
"""Revision 0014's stored tsvector of each message: PostgreSQL only, not in the models."""


@pytest.fixture
def engine(pg_fresh_url: Any) -> Any:
    made: list[Engine] = []

    def make() -> Engine:
        from hermes_store.backends import create_store_engine

        made.append(create_store_engine(pg_fresh_url()))
        return made[-1]

    yield make
    for each in made:
        each.dispose()


def _state(engine: Engine) -> tuple[list[Any], list[Any]]:
    with engine.connect() as connection:
        versions = [r[0] for r in connection.execute(text("SELECT version FROM schema_version"))]
        revisions = [r[0] for r in connection.execute(text("SELECT * FROM alembic_version"))]
    return versions, revisions


def _url(engine: Engine) -> str:
    return engine.url.render_as_string(hide_password=False)


def test_alembic_upgrade_head_builds_an_empty_postgresql_database(
    tmp_path: Path, pg_fresh_url: Any
) -> None:
    url = pg_fresh_url().render_as_string(hide_password=False)
    run_alembic(tmp_path, "-x", f"url={url}", "upgrade", "head")
    current = run_alembic(tmp_path, "-x", f"url={url}", "current").stdout
    assert f"{HEAD_REVISION} (head)" in current
    check = create_engine(url, poolclass=NullPool)
    try:
        assert _state(check) == ([HEAD_SCHEMA_VERSION], [HEAD_REVISION])
        with check.connect() as connection:
            columns = {
                (c["name"], type(c["type"]).__name__)
                for table in ("sessions", "messages")
                for c in inspect(connection).get_columns(table)
            }
            extensions = connection.execute(text("SELECT extname FROM pg_extension")).scalars()
            assert "pg_trgm" in set(extensions)
    finally:
        check.dispose()
    # Floats are 8 bytes (PostgreSQL's REAL would round epoch seconds), ids 64-bit.
    assert ("started_at", "DOUBLE_PRECISION") in columns
    assert ("timestamp", "DOUBLE_PRECISION") in columns
    assert ("estimated_cost_usd", "DOUBLE_PRECISION") in columns
    assert ("id", "BIGINT") in columns


KEPT_TABLES = {"alembic_version", *pg_totals.TABLES}


def test_the_models_agree_with_the_migrated_postgresql_schema(engine: Any) -> None:
    migrated = engine()
    upgrade_to_head(migrated)
    with migrated.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        differences = compare_metadata(context, Base.metadata)
        indexes = {i["name"] for i in inspect(connection).get_indexes("messages")}
    # Explained: revision 0016's flags, state_meta and indexes (the agent's, not documented);
    # the search indexes, revision 0014's stored tsvector and 0018's pair table (PostgreSQL
    # only), Alembic's own table and revision 0017's kept totals, and sessions.id, which
    # SQLite leaves nullable (the models mirror that) while a PostgreSQL primary key is
    # always NOT NULL.
    explained_indexes = (
        SEARCH_INDEXES | {TOTAL_TOKENS_INDEX, TITLE_PATTERN_INDEX} | ROOT_INDEXES | KEEPING_INDEXES
    )
    flat = [d[0] if isinstance(d, list) and len(d) == 1 else d for d in differences]
    unexplained = [
        d
        for d in flat
        if not (d[0] == "remove_index" and d[1].name in explained_indexes)
        and not (d[0] == "remove_table" and d[1].name in (*KEPT_TABLES, "state_meta", PAIR_TABLE))
        # revision 0016's: the agent's flags, kept outside the documented models
        and not (d[0] == "remove_column" and (d[2], d[3].name) in KEEPING_COLUMNS)
        and not (d[0] == "modify_nullable" and d[2:4] == ("sessions", "id"))
        and not (d[0] == "remove_column" and (d[2], d[3].name) == ("messages", VECTOR_COLUMN))
    ]
    assert unexplained == []
    assert indexes >= SEARCH_INDEXES


def test_timestamps_keep_their_fraction_of_a_second(store_url: str) -> None:
    with SessionDB(store_url, clock=lambda: 1_796_000_000.123456) as db:
        db.create_session("s", "cli")
        db.append_message("s", "user", "x")
        assert db.get_session("s")["started_at"] == 1_796_000_000.123456
        assert db.get_messages("s")[0]["timestamp"] == 1_796_000_000.123456


def test_downgrade_step_by_step_keeps_data_then_upgrades_again(engine: Any) -> None:
    migrated = engine()
    upgrade_to_head(migrated)
    url = _url(migrated)
    with SessionDB(url) as db:
        db.create_session("root", "cli", model="m")
        db.create_session("child", "cli", parent_session_id="root")
        db.append_messages("root", [{"role": "user", "content": "nebula words"}] * 3)
    for version in range(HEAD_SCHEMA_VERSION - 1, 0, -1):
        revision = revision_for_version(version)
        downgrade(migrated, revision)
        assert _state(migrated) == ([version], [revision])
        with migrated.connect() as connection:
            names = {i["name"] for i in inspect(connection).get_indexes("messages")}
            sessions = connection.execute(text("SELECT id FROM sessions ORDER BY id")).all()
            messages = connection.execute(text("SELECT COUNT(*) FROM messages")).scalar()
        assert ("idx_messages_content_trgm" in names) == (version >= 7)
        assert "idx_messages_fts" in names
        assert [r[0] for r in sessions] == ["child", "root"] and messages == 3
    downgrade(migrated, "base")
    with migrated.connect() as connection:
        assert set(inspect(connection).get_table_names()) == {"alembic_version"}
    upgrade_to_head(migrated)
    assert is_current(migrated)
    with SessionDB(url) as db:
        db.create_session("again", "cli")
        assert db.append_message("again", "user", "phoenix rises") == 1
        assert [h["session_id"] for h in db.search_messages("phoenix")] == ["again"]


def test_a_newer_schema_version_is_refused_on_postgresql(pg_fresh_url: Any) -> None:
    url: URL = pg_fresh_url()
    Store(url).close()
    raw = create_engine(url, poolclass=NullPool)
    try:
        with raw.begin() as connection:
            connection.execute(text("UPDATE schema_version SET version = 99"))
    finally:
        raw.dispose()
    with pytest.raises(SchemaError, match="schema_version 99"):
        Store(url)


def _vector_storage(engine: Engine) -> str:
    with engine.connect() as connection:
        return str(
            connection.execute(
                text(
                    "SELECT attstorage FROM pg_attribute "
                    "WHERE attrelid = 'messages'::regclass AND attname = :c"
                ),
                {"c": VECTOR_COLUMN},
            ).scalar()
        )


def test_word_vectors_stay_in_their_rows_from_revision_0019(engine: Any) -> None:
    migrated = engine()
    upgrade_to_head(migrated)
    assert _vector_storage(migrated) == "m"  # MAIN: compressed, in the row
    downgrade(migrated, "0018")
    assert _vector_storage(migrated) == "x"  # EXTENDED, PostgreSQL's default
    upgrade_to_head(migrated)
    assert _vector_storage(migrated) == "m"
