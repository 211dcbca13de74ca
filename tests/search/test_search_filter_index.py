"""Revision 0013's index of roles and sessions, and when substring matches follow word matches.

Expectations come from plain ``sqlite3`` on the file the store wrote (FTS5's
own ``ORDER BY rank``, ``LIKE`` for substrings), and from the same file
without the index (revision 0012, opened read-only: the statements that
read every match's row), so the index changes how rows are found, never
which.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hermes_store import SessionDB, Store
from hermes_store.backends.layout import SEARCH_FILTER_INDEX, TRIGRAM_INDEX
from hermes_store.backends.sqlite.library import driver as sqlite3
from hermes_store.repositories import search
from hermes_store.schema.migrate import downgrade, upgrade
from tests.support.search_rows import GATEWAY_FILTERS, first_column, gateway_order, hit_ids

pytestmark = pytest.mark.sqlite_only("revision 0013 is SQLite's; the rule is the FTS5 route's")

FILTERS: list[dict[str, Any]] = [
    {"source_filter": ["telegram", "discord"], "role_filter": ["user"]},
    {"role_filter": ["tool"]},
    {"source_filter": ["cli"]},
    {"exclude_sources": ["cli"], "role_filter": ["assistant", "user"]},
    {"source_filter": ["telegram"], "exclude_sources": ["telegram"]},
]


@pytest.fixture
def corpus(tmp_path: Path) -> Iterator[Path]:
    """Sessions of three sources; "build failed" in every role, glued to CJK in a few."""
    path = tmp_path / "state.db"
    rng = random.Random(1913)
    texts = [
        "the build failed again",
        "build failed: exit 2",
        "nothing broke",
        "构建build failed了",  # glued: no token "build" for unicode61
        "rebuild failed twice",  # glued to Latin: no token "build" either
        "build succeeded",
    ]
    db = SessionDB(path)
    for n in range(9):
        db.create_session(f"s{n}", ["cli", "telegram", "discord"][n % 3])
        db.append_messages(
            f"s{n}",
            [
                {"role": rng.choice(["user", "assistant", "tool"]), "content": rng.choice(texts)}
                for _ in range(40)
            ],
        )
    db.close()
    return path


def test_0013_adds_one_index_and_leaves_schema_version_at_6(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    store = Store(path, migrate=False)
    upgrade(store.engine, "0012")
    with sqlite3.connect(path) as raw:
        before = set(raw.execute("SELECT type, name, sql FROM sqlite_master"))
    upgrade(store.engine, "0013")
    with sqlite3.connect(path) as raw:
        after = set(raw.execute("SELECT type, name, sql FROM sqlite_master"))
        assert raw.execute("SELECT version FROM schema_version").fetchall() == [(6,)]
    assert {(kind, name) for kind, name, _sql in after - before} == {("index", SEARCH_FILTER_INDEX)}
    assert before <= after
    downgrade(store.engine, "0012")
    with sqlite3.connect(path) as raw:
        assert set(raw.execute("SELECT type, name, sql FROM sqlite_master")) == before
    store.close()


@pytest.mark.parametrize("filters", FILTERS)
def test_filtered_search_through_the_index_equals_reading_the_rows(
    corpus: Path, tmp_path: Path, filters: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(search, "RANK_WINDOW", 25)  # several windows over 300-odd matches
    at_head = SessionDB(corpus)
    old = tmp_path / "at-0012.db"
    with sqlite3.connect(corpus) as raw, sqlite3.connect(old) as copy:
        raw.backup(copy)
    store = Store(old)
    downgrade(store.engine, "0012")
    store.close()
    without_index = SessionDB(old, read_only=True)  # read-only: stays at 0012
    try:
        for query in ('"build failed"', "build", "failed OR nothing", "构建"):
            for limit, offset in ((20, 0), (7, 30), (500, 0)):
                page = {**filters, "limit": limit, "offset": offset}
                with_index = at_head.search_messages(query, **page)
                assert with_index == without_index.search_messages(query, **page), (query, page)
    finally:
        at_head.close()
        without_index.close()


def test_filtered_search_follows_fts5s_order_for_the_rows_the_filters_pass(
    corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(search, "RANK_WINDOW", 10_000)  # one window: exact bm25 order
    expected = gateway_order(corpus, "failed")
    db = SessionDB(corpus)
    hits = db.search_messages("failed", **GATEWAY_FILTERS, limit=1000)
    db.close()
    # then the substring matches ("build failed了"): see the two tests below
    assert len(expected) > 20 and hit_ids(hits)[: len(expected)] == expected


def _traced_search(path: Path, query: str, **filters: Any) -> tuple[list[int], list[str]]:
    """The hits' ids and every statement the search sent to SQLite for them."""
    store = Store(path)
    try:
        with store.read() as uow:
            driver: sqlite3.Connection = uow.connection.connection.driver_connection  # type: ignore[assignment]
            sent: list[str] = []
            driver.set_trace_callback(sent.append)
            try:
                hits = uow.search.search(query, **filters)
            finally:
                driver.set_trace_callback(None)
        return [hit.id for hit in hits], sent
    finally:
        store.close()


def test_substring_matches_follow_a_query_with_fewer_than_k_word_matches(
    corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``构建build failed了`` and ``rebuild failed`` hold no phrase "build failed" for
    unicode61: the trigram route adds them after the word matches, with the filters."""
    words = first_column(
        corpus, "SELECT rowid FROM messages_fts WHERE messages_fts MATCH '\"build failed\"'"
    )
    monkeypatch.setattr(search, "RANK_WINDOW", len(words) + 1)
    glued = first_column(
        corpus,
        "SELECT m.id FROM messages m JOIN sessions s ON s.id = m.session_id "
        "WHERE m.content LIKE '%build failed%' AND m.role = 'user' AND s.source = 'telegram' "
        "AND m.id NOT IN (SELECT rowid FROM messages_fts WHERE messages_fts MATCH "
        "'\"build failed\"') ORDER BY m.id DESC",
    )
    assert glued
    ids, _sent = _traced_search(
        corpus, '"build failed"', source_filter=["telegram"], role_filter=["user"], limit=500
    )
    assert ids[len(ids) - len(glued) :] == glued


def test_a_query_with_k_word_matches_or_more_gets_no_substring_matches(
    corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The page stays short, and the trigram index is not walked at all."""
    words = first_column(
        corpus, "SELECT rowid FROM messages_fts WHERE messages_fts MATCH '\"build failed\"'"
    )
    monkeypatch.setattr(search, "RANK_WINDOW", len(words))
    filters: dict[str, Any] = {"source_filter": ["telegram"], "role_filter": ["user"]}
    passed = first_column(
        corpus,
        "SELECT m.id FROM messages m JOIN sessions s ON s.id = m.session_id "
        "WHERE m.role = 'user' AND s.source = 'telegram'",
    )
    ids, sent = _traced_search(corpus, '"build failed"', **filters, limit=500)
    assert sorted(ids) == sorted(set(words) & set(passed))
    assert not [statement for statement in sent if TRIGRAM_INDEX in statement]
    # the same on any page of the unfiltered search: after the last word match, nothing
    ids, sent = _traced_search(corpus, '"build failed"', limit=20, offset=len(words) - 5)
    assert len(ids) == 5 and set(ids) <= set(words)
    assert not [statement for statement in sent if TRIGRAM_INDEX in statement]
