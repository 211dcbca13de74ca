"""Revision 0021 on a populated PostgreSQL store: vectors cut at punctuation (issue #28).

A store at 0020 holds vectors in which ``src/alpha7.sql`` is one token; the
upgrade replaces the trigger's function and rewrites every vector in
committed ranges while writers go on, after which the pieces of a path, a
host, an email or a version are found in the word index as FTS5 finds them.
The downgrade puts the glued vectors back by the same machinery; the health
check knows the function's body and its repair restores it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.engine import URL, Connection, Engine

from hermes_store import SessionDB, Store
from hermes_store.backends import create_store_engine
from hermes_store.backends.postgresql.vector_fill import rewrite_vectors
from hermes_store.backends.postgresql.word_index import (
    GLUED_VECTOR_EXPRESSION,
    GLUED_VECTOR_FUNCTION_DDL,
    vector_function_body,
)
from hermes_store.schema.migrate import downgrade, upgrade, upgrade_in_steps
from hermes_store.schema.state import HEAD_REVISION
from hermes_store.tools.check import check
from tests.support.pg_vectors import VectorCorpus, stale, writing

CORPUS = VectorCorpus(
    sessions=20,
    messages=2_000,
    messages_sql=(
        "INSERT INTO messages (session_id, role, content, timestamp) "
        "SELECT 's' || (1 + n % 20), CASE WHEN n % 3 = 0 THEN 'assistant' ELSE 'user' END, "
        "CASE n % 4 WHEN 0 THEN 'opened src/alpha' || (n % 9) || '.sql on db' || (n % 5) "
        "|| '.example.org' WHEN 1 THEN 'mail ops' || (n % 3) || '@example.org about v1.' "
        "|| (n % 7) || '.2' WHEN 2 THEN 'plain words of build ' || n "
        "ELSE 'took 1.' || (n % 10) || ' s at http://example.org/x?y=' || n END, n "
        "FROM generate_series(CAST(:a AS int), CAST(:b AS int)) AS n"
    ),
)
MESSAGES = CORPUS.messages
PIECES = ("alpha7", "sql", "db3", "example", "ops1", "org", "http")
QUERIES = ("src/alpha7.sql", "alpha7", "db3.example.org", "ops1@example.org", "v1.4.2", "1.5")


def _indexed(connection: Connection, word: str) -> int:
    """Messages whose stored vector holds ``word`` (a lexeme, not a substring)."""
    return int(
        connection.execute(
            text("SELECT count(*) FROM messages WHERE content_tsv @@ to_tsquery('simple', :w)"),
            {"w": f"'{word}'"},
        ).scalar_one()
    )


def _function_body(connection: Connection) -> str:
    return str(
        connection.execute(
            text("SELECT prosrc FROM pg_proc WHERE proname = 'messages_content_tsv'")
        ).scalar_one()
    )


def _until_the_upgrade_waits_or_ends(engine: Engine, upgraded: threading.Event) -> None:
    """Wait (on a connection of its own) until the upgrade has committed the new function and
    then either waits for this test's open writer or has ended without waiting for it.

    Before, the writer slept one second: on a slow machine the upgrade had not
    replaced the function by then, and when the writer did commit first the rows
    were rewritten anyway, so the test passed without the wait it is about.
    """
    deadline = time.monotonic() + 120
    with engine.connect() as watcher:
        watching = watcher.execution_options(isolation_level="AUTOCOMMIT")
        while not upgraded.is_set():
            assert time.monotonic() < deadline, "the upgrade neither waited nor ended"
            replaced = _function_body(watching) == vector_function_body()
            if replaced and watching.execute(_UPGRADE_WAITING).scalar_one():
                return
            time.sleep(0.02)


_UPGRADE_WAITING = text(
    "SELECT count(*) > 0 FROM pg_stat_activity WHERE pid <> pg_backend_pid() "
    "AND datname = current_database() AND query LIKE '%virtualxid = ANY(%'"
)
"""Whether another backend is polling for open writers (``vector_fill.wait_for_writers``)."""


def _searches(url: URL) -> list[list[tuple[Any, ...]]]:
    with SessionDB(url.render_as_string(hide_password=False)) as db:
        return [
            [(h["id"], h["session_id"], h["role"]) for h in db.search_messages(q, limit=50)]
            for q in QUERIES
        ] + [[(h["id"], h["role"]) for h in db.search_messages("alpha7", role_filter=["user"])]]


def test_upgrade_from_0020_rewrites_every_vector_and_the_pieces_are_indexed(
    pg_fresh_url: Callable[[], URL],
) -> None:
    made_at_head = pg_fresh_url()
    CORPUS.populated(made_at_head, "head").dispose()
    url = pg_fresh_url()
    engine = CORPUS.populated(url, "0020")
    try:
        with engine.connect() as connection:
            assert stale(connection, GLUED_VECTOR_EXPRESSION) == 0
            assert stale(connection) > 0
            assert [_indexed(connection, p) for p in PIECES] == [0, 0, 0, 0, 0, 0, 0]
        upgrade_in_steps(engine, lambda *_: None)
        with engine.connect() as connection:
            revision = connection.execute(text("SELECT version_num FROM alembic_version"))
            assert revision.scalar() == HEAD_REVISION
            assert stale(connection) == 0
            assert all(_indexed(connection, p) > 0 for p in PIECES)
            assert _function_body(connection) == vector_function_body()
    finally:
        engine.dispose()
    searched = _searches(url)
    assert all(searched), searched
    assert searched == _searches(made_at_head)


def test_writers_during_the_upgrade_all_get_the_new_vectors(
    pg_fresh_url: Callable[[], URL],
) -> None:
    url = pg_fresh_url()
    engine = CORPUS.populated(url, "0020")

    def edit(connection: Connection, n: int) -> None:  # an edit of an old row meanwhile
        connection.execute(
            text("UPDATE messages SET content = :c WHERE id = :i"),
            {"c": f"edited to lib/beta{n}.py", "i": n % MESSAGES + 1},
        )

    with writing(url, CORPUS, edit) as writer:
        upgrade_in_steps(engine, lambda *_: None)
    try:
        with engine.connect() as connection:
            left = stale(connection)
            total = connection.execute(text("SELECT count(*) FROM messages")).scalar_one()
            edited = _indexed(connection, "py")
    finally:
        engine.dispose()
    assert writer.failures == [] and writer.appended
    assert left == 0 and total == MESSAGES + len(writer.appended)
    assert edited > 0


def test_a_writer_open_across_the_function_change_is_waited_for(
    pg_fresh_url: Callable[[], URL],
) -> None:
    """A transaction holding ``messages`` when the function changed still calls the old one.

    Its rows, uncommitted while the ranges pass, would keep the glued vector;
    the rewrite waits for it to end first, so they are rewritten too.
    """
    url = pg_fresh_url()
    engine = CORPUS.populated(url, "0020")
    began, upgraded_event = threading.Event(), threading.Event()
    late = time.monotonic() + 3600.0

    def open_writer() -> None:
        nonlocal late
        with engine.begin() as connection:
            connection.execute(text(CORPUS.messages_sql), {"a": MESSAGES + 1, "b": MESSAGES + 1})
            began.set()
            _until_the_upgrade_waits_or_ends(engine, upgraded_event)
            connection.execute(text(CORPUS.messages_sql), {"a": MESSAGES + 2, "b": MESSAGES + 2})
            late = time.monotonic()

    writer = threading.Thread(target=open_writer)
    writer.start()
    try:
        assert began.wait(30)
        try:
            upgrade_in_steps(engine, lambda *_: None)
        finally:
            upgraded = time.monotonic()
            upgraded_event.set()
        writer.join(30)
        with engine.connect() as connection:
            left = stale(connection)
            total = connection.execute(text("SELECT count(*) FROM messages")).scalar_one()
    finally:
        engine.dispose()
    assert total == MESSAGES + 2
    assert left == 0
    assert upgraded > late  # the upgrade ended after the writer's commit, not before it


def test_a_rewrite_writes_only_what_changes_and_a_second_run_has_nothing_to_do(
    pg_fresh_url: Callable[[], URL],
) -> None:
    engine = CORPUS.populated(pg_fresh_url(), "0020")
    try:
        with engine.connect() as raw:
            beside = raw.execution_options(isolation_level="AUTOCOMMIT")
            differing = stale(beside)
            assert 0 < differing < MESSAGES  # 'plain words of build n' reads the same
            assert rewrite_vectors(beside, batch=300) == differing
            assert stale(beside) == 0
            assert rewrite_vectors(beside, batch=300) == 0
    finally:
        engine.dispose()


def test_downgrade_puts_the_glued_vectors_back_and_upgrade_cuts_them_again(
    pg_fresh_url: Callable[[], URL],
) -> None:
    url = pg_fresh_url()
    engine = CORPUS.populated(url, "head")
    try:
        downgrade(engine, "0020")
        with engine.connect() as connection:
            assert stale(connection, GLUED_VECTOR_EXPRESSION) == 0
            assert _function_body(connection) != vector_function_body()
            assert _indexed(connection, "alpha7") == 0
        CORPUS.rows(engine, MESSAGES + 1, MESSAGES + 10)  # the old trigger keeps the old vector
        upgrade(engine, "head")
        with engine.connect() as connection:
            assert stale(connection) == 0
            assert _indexed(connection, "alpha7") > 0
    finally:
        engine.dispose()


def test_an_empty_store_made_at_head_has_the_new_function(
    pg_fresh_url: Callable[[], URL],
) -> None:
    engine = create_store_engine(pg_fresh_url())
    try:
        upgrade(engine, "head")
        with engine.connect() as connection:
            assert _function_body(connection) == vector_function_body()
    finally:
        engine.dispose()


@pytest.mark.parametrize("by", ["function", "vectors"])
def test_check_finds_the_old_function_and_repair_restores_it(
    pg_fresh_url: Callable[[], URL], by: str
) -> None:
    """An older version's function put back, or vectors left glued: found, then repaired."""
    url = pg_fresh_url()
    engine = CORPUS.populated(url, "head")
    try:
        with engine.begin() as connection:
            connection.execute(text(GLUED_VECTOR_FUNCTION_DDL))
            if by == "vectors":
                connection.execute(text("UPDATE messages SET content_tsv = NULL WHERE id < 50"))
        CORPUS.rows(engine, MESSAGES + 1, MESSAGES + 4)
        with engine.connect() as connection:
            assert stale(connection) > 0
        with Store(url) as store:
            found = check(store)
            assert not found.ok and found.fts is not None
            assert "function does not make the current vector" in found.fts
            assert ("without a vector" in found.fts) is (by == "vectors")
            assert check(store, repair=True).rebuilt_fts
            assert check(store).ok
        with engine.connect() as connection:
            assert stale(connection) == 0
            assert _function_body(connection) == vector_function_body()
    finally:
        engine.dispose()
