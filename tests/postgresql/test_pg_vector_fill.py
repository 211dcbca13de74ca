"""Revision 0014 on a populated PostgreSQL table, and revision 0020 (issue #28, item 5).

0014 adds ``messages.content_tsv`` as a plain column kept by a trigger, fills
the rows already there in committed batches and builds its indexes
``CONCURRENTLY``; 0020 turns a column the first 0014 made (generated, stored)
into the same trigger-kept one. Whatever the path, a store at head has one
schema and one search: each test compares against a store made at head.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.engine import URL, Connection, Engine

from hermes_store import SessionDB, Store
from hermes_store.backends.postgresql.vector_fill import fill_vectors
from hermes_store.backends.postgresql.word_index import (
    ADD_VECTOR_COLUMN,
    GENERATED_VECTOR_COLUMN,
    NEW_WORD_INDEX,
    ROLE_INDEX_DDL,
    VECTOR_FUNCTION_DDL,
    VECTOR_TRIGGER_DDL,
    WORD_INDEX,
    WORD_INDEX_DDL,
)
from hermes_store.schema.migrate import stamp, upgrade_in_steps
from hermes_store.schema.state import HEAD_REVISION
from hermes_store.tools.check import check
from tests.support.pg_vectors import VectorCorpus, stale, writing

MESSAGES = 3_000
QUERIES = ("rollout", "build 17", '"failed with error 5"', "docker OR cron")

CORPUS = VectorCorpus(
    sessions=30,
    messages=MESSAGES,
    messages_sql=(
        "INSERT INTO messages (session_id, role, content, timestamp) "
        "SELECT 's' || (1 + n % 30), CASE WHEN n % 3 = 0 THEN 'assistant' ELSE 'user' END, "
        "'rollout of build ' || n || ' failed with error ' || (n % 7) || "
        "CASE WHEN n % 5 = 0 THEN ' docker' ELSE ' cron' END, n "
        "FROM generate_series(CAST(:a AS int), CAST(:b AS int)) AS n"
    ),
)


def _schema(connection: Connection) -> dict[str, Any]:
    """What a migration leaves on ``messages``: columns, triggers, indexes and their validity."""

    def rows(sql: str) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in connection.execute(text(sql))]

    return {
        "columns": rows(
            "SELECT attname, format_type(atttypid, atttypmod), attnotnull, attgenerated, "
            "attstorage FROM pg_attribute WHERE attrelid = 'messages'::regclass "
            "AND attnum > 0 AND NOT attisdropped ORDER BY attname"
        ),
        "triggers": rows(
            "SELECT tgname, pg_get_triggerdef(oid) FROM pg_trigger "
            "WHERE tgrelid = 'messages'::regclass AND NOT tgisinternal ORDER BY tgname"
        ),
        "indexes": rows(
            "SELECT c.relname, pg_get_indexdef(i.indexrelid), i.indisvalid FROM pg_index i "
            "JOIN pg_class c ON c.oid = i.indexrelid "
            "WHERE i.indrelid = 'messages'::regclass ORDER BY c.relname"
        ),
        "function": rows(
            "SELECT pg_get_functiondef(p.oid) FROM pg_proc p WHERE proname = 'messages_content_tsv'"
        ),
    }


def _searches(url: URL) -> list[list[tuple[Any, ...]]]:
    with SessionDB(url.render_as_string(hide_password=False)) as db:
        return [
            [(h["id"], h["session_id"], h["role"]) for h in db.search_messages(q, limit=50)]
            for q in QUERIES
        ] + [
            [(h["id"], h["role"]) for h in db.search_messages("rollout", role_filter=["assistant"])]
        ]


@pytest.fixture
def fresh_at_head(pg_fresh_url: Callable[[], URL]) -> Any:
    """A store made at head holding the same rows: the schema and searches to arrive at."""
    url = pg_fresh_url()
    engine = CORPUS.populated(url, "head")
    try:
        with engine.connect() as connection:
            schema = _schema(connection)
            assert stale(connection) == 0
    finally:
        engine.dispose()
    return schema, _searches(url)


def _at_head(engine: Engine) -> tuple[dict[str, Any], int]:
    with engine.connect() as connection:
        revision = connection.execute(text("SELECT version_num FROM alembic_version")).scalar()
        assert revision == HEAD_REVISION
        return _schema(connection), stale(connection)


def test_a_populated_store_upgraded_from_0013_matches_one_made_at_head(
    pg_fresh_url: Callable[[], URL], fresh_at_head: Any
) -> None:
    url = pg_fresh_url()
    engine = CORPUS.populated(url, "0013")
    try:
        upgrade_in_steps(engine, lambda *_: None)
        schema, left = _at_head(engine)
    finally:
        engine.dispose()
    assert left == 0
    assert schema == fresh_at_head[0]
    assert not any(name == NEW_WORD_INDEX for name, *_ in schema["indexes"])
    assert _searches(url) == fresh_at_head[1]


def test_a_store_that_ran_the_generated_column_converges_by_0020(
    pg_fresh_url: Callable[[], URL], fresh_at_head: Any
) -> None:
    url = pg_fresh_url()
    engine = CORPUS.populated(url, "0013")
    try:
        with engine.begin() as connection:  # revision 0014 as it first was
            connection.execute(text(f"DROP INDEX {WORD_INDEX}"))
            connection.execute(text(GENERATED_VECTOR_COLUMN))
            connection.execute(text(WORD_INDEX_DDL))
            connection.execute(text(ROLE_INDEX_DDL))
        stamp(engine, "0014")
        with engine.connect() as connection:
            assert _schema(connection)["columns"] != fresh_at_head[0]["columns"]
        upgrade_in_steps(engine, lambda *_: None)
        schema, left = _at_head(engine)
        assert left == 0
        assert schema == fresh_at_head[0]
        assert _searches(url) == fresh_at_head[1]
        CORPUS.rows(engine, MESSAGES + 1, MESSAGES + 10)  # the trigger keeps the vectors now
        with engine.begin() as connection:
            connection.execute(text("UPDATE messages SET content = 'edited words' WHERE id = 1"))
            assert stale(connection) == 0
            assert connection.execute(
                text("SELECT content_tsv @@ 'edited'::tsquery FROM messages WHERE id = 1")
            ).scalar_one()
    finally:
        engine.dispose()


def test_the_trigger_gives_new_rows_their_vectors_and_the_fill_gives_the_old_ones(
    pg_fresh_url: Callable[[], URL],
) -> None:
    """0014's populated path by its parts: appends between trigger and fill are not missed."""
    engine = CORPUS.populated(pg_fresh_url(), "0013")
    try:
        with engine.connect() as raw:
            beside = raw.execution_options(isolation_level="AUTOCOMMIT")
            beside.execute(text(ADD_VECTOR_COLUMN))
            beside.execute(text(VECTOR_FUNCTION_DDL))
            beside.execute(text(VECTOR_TRIGGER_DDL))
            CORPUS.rows(engine, MESSAGES + 1, MESSAGES + 50)  # appended during the fill
            missing = "SELECT count(*) FROM messages WHERE content_tsv IS NULL"
            assert beside.execute(text(missing)).scalar_one() == MESSAGES
            assert fill_vectors(beside, batch=700) == MESSAGES
            assert stale(beside) == 0
            assert fill_vectors(beside, batch=700) == 0  # a second run has nothing to do
    finally:
        engine.dispose()


def test_writes_during_the_upgrade_all_get_their_vectors(pg_fresh_url: Callable[[], URL]) -> None:
    url = pg_fresh_url()
    engine = CORPUS.populated(url, "0013")
    with writing(url, CORPUS) as writer:
        upgrade_in_steps(engine, lambda *_: None)
    try:
        _, left = _at_head(engine)
        with engine.connect() as connection:
            total = connection.execute(text("SELECT count(*) FROM messages")).scalar_one()
    finally:
        engine.dispose()
    assert writer.failures == [] and writer.appended
    assert left == 0 and total == MESSAGES + len(writer.appended)


def test_a_failed_0014_leaves_0013_recorded_and_a_second_run_finishes_it(
    pg_fresh_url: Callable[[], URL], fresh_at_head: Any
) -> None:
    url = pg_fresh_url()
    engine = CORPUS.populated(url, "0013")
    try:
        with engine.begin() as connection:  # takes the name the new index is built under
            connection.execute(text(f"CREATE TABLE {NEW_WORD_INDEX} (x int)"))
        with pytest.raises(Exception, match=NEW_WORD_INDEX):
            upgrade_in_steps(engine, lambda *_: None)
        with engine.begin() as connection:
            recorded = connection.execute(text("SELECT version_num FROM alembic_version")).scalar()
            count = connection.execute(text("SELECT count(*) FROM messages")).scalar_one()
            indexes = {r[0] for r in connection.execute(text("SELECT indexname FROM pg_indexes"))}
            connection.execute(text(f"DROP TABLE {NEW_WORD_INDEX}"))
        assert (recorded, count) == ("0013", MESSAGES)
        assert WORD_INDEX in indexes  # the old index still serves searches
        upgrade_in_steps(engine, lambda *_: None)
        schema, left = _at_head(engine)
    finally:
        engine.dispose()
    assert left == 0
    assert schema == fresh_at_head[0]
    assert _searches(url) == fresh_at_head[1]


def test_check_finds_a_disabled_vector_trigger_and_repair_restores_the_vectors(
    pg_fresh_url: Callable[[], URL],
) -> None:
    url = pg_fresh_url()
    engine = CORPUS.populated(url, "head")
    try:
        with engine.begin() as connection:
            connection.execute(text("ALTER TABLE messages DISABLE TRIGGER messages_content_tsv"))
        CORPUS.rows(engine, MESSAGES + 1, MESSAGES + 5)
        with engine.begin() as connection:
            connection.execute(text("UPDATE messages SET content = 'zebra' WHERE id = 1"))
            assert stale(connection) == 6
        with Store(url) as store:
            found = check(store)
            assert not found.ok and found.fts is not None
            assert "trigger" in found.fts and "without a vector" in found.fts
            assert check(store, repair=True).rebuilt_fts
            assert check(store).ok
        with engine.connect() as connection:
            assert stale(connection) == 0
            enabled = connection.execute(
                text("SELECT tgenabled FROM pg_trigger WHERE tgname = 'messages_content_tsv'")
            ).scalar_one()
        assert enabled == "O"
        with SessionDB(url.render_as_string(hide_password=False)) as db:
            assert [h["id"] for h in db.search_messages("zebra")] == [1]
    finally:
        engine.dispose()
