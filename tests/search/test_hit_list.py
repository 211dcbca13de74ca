"""A page's contexts in one statement (PostgreSQL's hit list) give what one a hit gives.

The same rows go into a SQLite file and a PostgreSQL database: neighbours
sharing a timestamp (the id breaks the tie), hits first and last in their
session, a hit whose row is gone, content longer than the cut and NULL
content. PostgreSQL's one-statement contexts must equal both its own
one-hit statement and SQLite's, hit by hit, in the order the hits were given.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.engine import URL

from hermes_store import SessionDB
from hermes_store.repositories.search import CONTEXT_CHARS

# (session, role, content, timestamp): ids are 1.. in this order on both backends.
ROWS: list[tuple[str, str, str | None, float]] = [
    ("a", "user", "first in a", 10.0),
    ("a", "assistant", "x" * (CONTEXT_CHARS + 50), 11.0),
    ("b", "user", "only one before the tie", 5.0),
    ("a", "tool", None, 11.0),  # ties with id 2: after it by id
    ("b", "assistant", "tie one", 6.0),
    ("b", "user", "tie two", 6.0),
    ("a", "user", "last in a", 12.0),
    ("c", "user", "alone", 1.0),
    ("a", "assistant", "an earlier one written late", 9.0),
]
HITS = [(s, i) for i, (s, *_rest) in enumerate(ROWS, start=1)] + [("a", 999), ("b", 5)]
"""Every row as a hit, a hit whose row does not exist, and a repeated hit."""


def fill(url: str) -> None:
    with SessionDB(url) as db:
        for session in ("a", "b", "c"):
            db.create_session(session, "cli")
        with db.store.write() as unit:
            for session, role, content, timestamp in ROWS:
                unit.connection.execute(
                    text(
                        "INSERT INTO messages (session_id, role, content, timestamp) "
                        "VALUES (:s, :r, :c, :t)"
                    ),
                    {"s": session, "r": role, "c": content, "t": timestamp},
                )


@pytest.fixture
def both(pg_url: URL, tmp_path: Path) -> Iterator[tuple[SessionDB, SessionDB]]:
    lite_url = f"sqlite:///{tmp_path / 'state.db'}"
    pg = pg_url.render_as_string(hide_password=False)
    fill(lite_url)
    fill(pg)
    with SessionDB(lite_url) as lite, SessionDB(pg) as server:
        yield lite, server


def contexts(db: SessionDB, hits: list[tuple[str, int]]) -> list[list[dict[str, Any]]]:
    with db.store.read() as unit:
        return unit.search.contexts(hits)


def one_by_one(db: SessionDB, hits: list[tuple[str, int]]) -> list[list[dict[str, Any]]]:
    with db.store.read() as unit:
        return [unit.search.context(session, hit) for session, hit in hits]


def test_postgresql_offers_a_hit_list_and_sqlite_does_not(
    both: tuple[SessionDB, SessionDB],
) -> None:
    lite, pg = both
    with lite.store.read() as unit:
        assert unit.backend.search(unit.connection, unit.layout).hit_list_statement(9) is None
    with pg.store.read() as unit:
        assert unit.backend.search(unit.connection, unit.layout).hit_list_statement(9) is not None


def test_one_statement_gives_what_one_a_hit_gives(both: tuple[SessionDB, SessionDB]) -> None:
    lite, pg = both
    on_pg = contexts(pg, HITS)
    assert on_pg == one_by_one(pg, HITS)
    assert on_pg == contexts(lite, HITS) == one_by_one(lite, HITS)


def test_the_contexts_are_the_neighbours_in_session_order(
    both: tuple[SessionDB, SessionDB],
) -> None:
    _lite, pg = both
    found = dict(zip(HITS, contexts(pg, HITS), strict=True))
    assert [line["content"] for line in found[("a", 4)]] == [
        "x" * CONTEXT_CHARS,
        "",
        "last in a",
    ]
    assert [line["content"] for line in found[("b", 5)]] == [
        "only one before the tie",
        "tie one",
        "tie two",
    ]
    assert [line["content"] for line in found[("c", 8)]] == ["alone"]
    assert found[("a", 999)] == []
    assert contexts(pg, []) == []


def test_search_pages_carry_the_same_context_on_both(
    both: tuple[SessionDB, SessionDB],
) -> None:
    lite, pg = both
    for query in ("tie", "a", "alone", "first OR last"):
        by_id_lite = {hit["id"]: hit["context"] for hit in lite.search_messages(query)}
        by_id_pg = {hit["id"]: hit["context"] for hit in pg.search_messages(query)}
        assert by_id_pg == by_id_lite, query
        assert by_id_pg, query
