"""Ranking within windows of the newest K matches: exact up to K, bounded beyond.

K is made small here (``RANK_WINDOW``) so a few hundred messages cross
several windows. The expectations are each backend's own ranking over the
same store, restricted by plain SQL to each window's id range: FTS5's
``ORDER BY rank`` (bm25) on SQLite, ``ts_rank`` of the text's vector (ties
newest first) on PostgreSQL. The window rule is the same on both.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import closing

import pytest

from hermes_store import SessionDB
from hermes_store.backends.postgresql.word_index import vector_of
from hermes_store.backends.sqlite.library import driver as sqlite3
from hermes_store.repositories import search

K = 25
WORD = "zebrafish"
OTHER = ["lorem", "ipsum", "dolor", "amet", "consectetur", "adipiscing", "elit", "sed"]

# What a match is and how it ranks, per backend, in plain SQL over the same rows
# (``m`` the message, ``s`` its session). PostgreSQL's rank reads the vector made
# from the text by the head's expression, so the expectation does not depend on the
# store's stored column.
_MATCHES = {
    "sqlite": (
        "FROM messages_fts f JOIN messages m ON m.id = f.rowid "
        "JOIN sessions s ON s.id = m.session_id WHERE messages_fts MATCH ?"
    ),
    "postgresql": (
        "FROM messages m JOIN sessions s ON s.id = m.session_id "
        f"WHERE {vector_of('m.content')} @@ to_tsquery('simple', ?)"
    ),
}
_RANK_ORDER = {
    "sqlite": "rank",
    "postgresql": f"ts_rank({vector_of('m.content')}, to_tsquery('simple', ?), 1) DESC, m.id DESC",
}


class Ranks:
    """The backend's own orders of the matches of :data:`WORD`, in plain SQL."""

    def __init__(self, backend: str, db: SessionDB) -> None:
        self.backend, self.db = backend, db

    def _ids(self, sql: str, args: tuple[object, ...]) -> list[int]:
        if self.backend == "sqlite":
            assert self.db.db_path is not None
            with closing(sqlite3.connect(self.db.db_path)) as raw:
                return [row[0] for row in raw.execute(sql, args)]
        with self.db.store.engine.connect() as connection:
            result = connection.exec_driver_sql(sql.replace("?", "%s"), args)
            return [row[0] for row in result]

    def ranked(self, extra: str = "", args: tuple[object, ...] = ()) -> list[int]:
        """The whole ranking of the matches, optionally restricted by ``extra``."""
        order = _RANK_ORDER[self.backend]
        rank_args = (WORD,) if "?" in order else ()
        sql = f"SELECT m.id {_MATCHES[self.backend]} {extra} ORDER BY {order}"
        return self._ids(sql, (WORD, *args, *rank_args))

    def newest(self, extra: str = "", args: tuple[object, ...] = ()) -> list[int]:
        sql = f"SELECT m.id {_MATCHES[self.backend]} {extra} ORDER BY m.id DESC"
        return self._ids(sql, (WORD, *args))

    def windows(self, extra: str = "", args: tuple[object, ...] = ()) -> list[int]:
        """The whole bounded order: windows of the K newest matches (before any filter),
        the next K, and all older ones, each ranked on its own.

        ``extra`` filters within the windows: a filtered search is the unfiltered
        order with the other rows left out.
        """
        newest = self.newest()
        order: list[int] = []
        for members in (newest[:K], newest[K : 2 * K], newest[2 * K :]):
            if members:
                low, high = min(members), max(members)
                order += self.ranked(f"{extra} AND m.id BETWEEN ? AND ?", (*args, low, high))
        return order


@pytest.fixture
def corpus(store_url: str, backend: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Ranks]:
    monkeypatch.setattr(search, "RANK_WINDOW", K)
    rng = random.Random(1219)
    db = SessionDB(store_url)
    for n in range(4):
        db.create_session(f"s{n}", ["cli", "telegram"][n % 2])
        rows = []
        for _ in range(40):
            words = [rng.choice(OTHER) for _ in range(rng.randint(0, 30))]
            if rng.random() < 0.8:
                words += [WORD] * rng.randint(1, 4)
            rng.shuffle(words)
            rows.append({"role": rng.choice(["user", "assistant"]), "content": " ".join(words)})
        db.append_messages(f"s{n}", rows)
    yield Ranks(backend, db)
    db.close()


def _ids(hits: list[dict[str, object]]) -> list[int]:
    return [int(hit["id"]) for hit in hits]  # type: ignore[call-overload]


def test_at_most_k_matches_are_ranked_exactly_as_the_backend_ranks_them(
    corpus: Ranks, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = corpus.db
    matches = len(corpus.newest())
    assert matches > K
    monkeypatch.setattr(search, "RANK_WINDOW", matches)  # one window holds them all
    assert _ids(db.search_messages(WORD, limit=matches)) == corpus.ranked()
    # Filters within that one window: exact order among the rows they let through.
    hits = db.search_messages(WORD, source_filter=["telegram"], role_filter=["user"], limit=100)
    assert _ids(hits) == corpus.ranked("AND m.role = 'user' AND s.source = 'telegram'")


def test_more_than_k_matches_rank_the_newest_k_first(corpus: Ranks) -> None:
    db = corpus.db
    newest = corpus.newest()
    assert len(newest) > 3 * K
    first = db.search_messages(WORD, limit=20)
    assert set(_ids(first)) <= set(newest[:K])
    assert _ids(first) == corpus.ranked("AND m.id >= ?", (newest[K - 1],))[:20]
    assert _ids(first) != corpus.ranked()[:20]  # the bound is visible on this corpus


def test_pages_walk_the_windows_in_order_and_return_every_match_once(corpus: Ranks) -> None:
    db = corpus.db
    expected = corpus.windows()
    pages = []
    for offset in range(0, len(expected) + 10, 10):
        pages += _ids(db.search_messages(WORD, limit=10, offset=offset))
    assert pages == expected
    assert sorted(pages) == sorted(corpus.newest())
    assert _ids(db.search_messages(WORD, limit=7, offset=K - 3)) == expected[K - 3 : K + 4]


def test_filtered_search_is_the_unfiltered_order_without_the_other_rows(corpus: Ranks) -> None:
    db = corpus.db
    extra = "AND m.role = 'user'"
    expected = corpus.windows(extra)
    assert len(expected) > K
    hits = db.search_messages(WORD, role_filter=["user"], limit=len(expected) + 5)
    assert _ids(hits) == expected
    unfiltered = _ids(db.search_messages(WORD, limit=10_000))
    users = set(corpus.newest(extra))
    assert [id_ for id_ in unfiltered if id_ in users] == expected
    assert (
        _ids(db.search_messages(WORD, role_filter=["user"], limit=5, offset=K))
        == expected[K : K + 5]
    )
