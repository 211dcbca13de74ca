"""bm25 ranks within windows of the newest K matches: exact up to K, bounded beyond.

K is made small here (``RANK_WINDOW``) so a few hundred messages cross
several windows; the expectations are FTS5's own ``ORDER BY rank`` over the
same file, restricted by plain SQL to each window's rowid range.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from hermes_store import SessionDB
from hermes_store.backends.sqlite.library import driver as sqlite3
from hermes_store.repositories import search

pytestmark = pytest.mark.sqlite_only("FTS5 rank windows (PostgreSQL ranks with ts_rank)")

K = 25
WORD = "zebrafish"
OTHER = ["lorem", "ipsum", "dolor", "amet", "consectetur", "adipiscing", "elit", "sed"]


@pytest.fixture
def corpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, SessionDB]]:
    monkeypatch.setattr(search, "RANK_WINDOW", K)
    path = tmp_path / "state.db"
    rng = random.Random(1219)
    db = SessionDB(path)
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
    yield path, db
    db.close()


def _raw_rank(path: Path, extra: str = "", args: tuple[object, ...] = ()) -> list[int]:
    """FTS5's ``ORDER BY rank`` over the matches, optionally restricted by ``extra``."""
    with sqlite3.connect(path) as raw:
        return [
            row[0]
            for row in raw.execute(
                "SELECT f.rowid FROM messages_fts f JOIN messages m ON m.id = f.rowid "
                "JOIN sessions s ON s.id = m.session_id "
                f"WHERE messages_fts MATCH ? {extra} ORDER BY rank",
                (WORD, *args),
            )
        ]


def _newest(path: Path, extra: str = "", args: tuple[object, ...] = ()) -> list[int]:
    with sqlite3.connect(path) as raw:
        return [
            row[0]
            for row in raw.execute(
                "SELECT f.rowid FROM messages_fts f JOIN messages m ON m.id = f.rowid "
                "JOIN sessions s ON s.id = m.session_id "
                f"WHERE messages_fts MATCH ? {extra} ORDER BY f.rowid DESC",
                (WORD, *args),
            )
        ]


def _windows(path: Path, extra: str = "", args: tuple[object, ...] = ()) -> list[int]:
    """The whole bounded order: windows of the K newest matches (before any filter), the
    next K, and all older ones, each ranked on its own.

    ``extra`` filters within the windows: a filtered search is the unfiltered
    order with the other rows left out.
    """
    newest = _newest(path)
    order: list[int] = []
    for members in (newest[:K], newest[K : 2 * K], newest[2 * K :]):
        if members:
            low, high = min(members), max(members)
            order += _raw_rank(path, f"{extra} AND f.rowid BETWEEN ? AND ?", (*args, low, high))
    return order


def _ids(hits: list[dict[str, object]]) -> list[int]:
    return [int(hit["id"]) for hit in hits]  # type: ignore[call-overload]


def test_at_most_k_matches_are_ranked_exactly_as_fts5_ranks_them(
    corpus: tuple[Path, SessionDB], monkeypatch: pytest.MonkeyPatch
) -> None:
    path, db = corpus
    matches = len(_newest(path))
    assert matches > K
    monkeypatch.setattr(search, "RANK_WINDOW", matches)  # one window holds them all
    assert _ids(db.search_messages(WORD, limit=matches)) == _raw_rank(path)
    # Filters within that one window: exact order among the rows they let through.
    hits = db.search_messages(WORD, source_filter=["telegram"], role_filter=["user"], limit=100)
    assert _ids(hits) == _raw_rank(path, "AND m.role = 'user' AND s.source = 'telegram'")


def test_more_than_k_matches_rank_the_newest_k_first(corpus: tuple[Path, SessionDB]) -> None:
    path, db = corpus
    newest = _newest(path)
    assert len(newest) > 3 * K
    first = db.search_messages(WORD, limit=20)
    assert set(_ids(first)) <= set(newest[:K])
    assert _ids(first) == _raw_rank(path, "AND f.rowid >= ?", (newest[K - 1],))[:20]
    assert _ids(first) != _raw_rank(path)[:20]  # the bound is visible on this corpus


def test_pages_walk_the_windows_in_order_and_return_every_match_once(
    corpus: tuple[Path, SessionDB],
) -> None:
    path, db = corpus
    expected = _windows(path)
    pages = []
    for offset in range(0, len(expected) + 10, 10):
        pages += _ids(db.search_messages(WORD, limit=10, offset=offset))
    assert pages == expected
    assert sorted(pages) == sorted(_newest(path))
    assert _ids(db.search_messages(WORD, limit=7, offset=K - 3)) == expected[K - 3 : K + 4]


def test_filtered_search_is_the_unfiltered_order_without_the_other_rows(
    corpus: tuple[Path, SessionDB],
) -> None:
    path, db = corpus
    extra = "AND m.role = 'user'"
    expected = _windows(path, extra)
    assert len(expected) > K
    hits = db.search_messages(WORD, role_filter=["user"], limit=len(expected) + 5)
    assert _ids(hits) == expected
    unfiltered = _ids(db.search_messages(WORD, limit=10_000))
    users = set(_newest(path, extra))
    assert [id_ for id_ in unfiltered if id_ in users] == expected
    assert (
        _ids(db.search_messages(WORD, role_filter=["user"], limit=5, offset=K))
        == expected[K : K + 5]
    )
