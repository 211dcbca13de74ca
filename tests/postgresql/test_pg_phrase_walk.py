"""A phrase's rank window found by walking the newest rows is the window the full statement finds.

PostgreSQL first looks for a phrase's window among the newest rows (a walk
of the primary key, bounded); only when the walk does not find it whole
does the full statement run. Paged through, with filters and without, the
hits must be the same whichever way each window was found.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy.engine import URL

from hermes_store import SessionDB
from hermes_store.backends.postgresql import search as pg_search
from hermes_store.repositories import search


@pytest.fixture
def pg(pg_url: URL, monkeypatch: pytest.MonkeyPatch) -> Iterator[SessionDB]:
    monkeypatch.setattr(search, "RANK_WINDOW", 7)
    with SessionDB(pg_url.render_as_string(hide_password=False)) as db:
        for name in ("a", "b"):
            db.create_session(name, "cli" if name == "a" else "telegram")
        for n in range(150):
            text = "the build failed again" if n % 3 else "build then failed later"
            if n % 11 == 0:
                text += " build failed build failed twice"
            db.append_message("a" if n % 2 else "b", "user" if n % 5 else "assistant", text)
        yield db


def pages(db: SessionDB, **filters: Any) -> list[list[int]]:
    return [
        [hit["id"] for hit in db.search_messages('"build failed"', limit=6, offset=o, **filters)]
        for o in range(0, 120, 6)
    ]


@pytest.mark.parametrize("filters", [{}, {"role_filter": ["user"], "source_filter": ["cli"]}])
def test_walked_windows_are_the_full_statements_windows(
    pg: SessionDB, monkeypatch: pytest.MonkeyPatch, filters: dict[str, Any]
) -> None:
    walked = pages(pg, **filters)
    monkeypatch.setattr(pg_search, "WALK_ROWS_PER_MATCH", 0)  # the walk never finds one
    full = pages(pg, **filters)
    assert walked == full
    assert sum(map(len, full)) > 30


def test_the_walk_is_what_finds_a_common_phrases_window(
    pg: SessionDB, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sqlalchemy import event

    sent: list[str] = []
    engine = pg.store.engine
    catch = lambda *args: sent.append(args[2])  # noqa: E731
    event.listen(engine, "before_cursor_execute", catch)
    try:
        pg.search_messages('"build failed"')
    finally:
        event.remove(engine, "before_cursor_execute", catch)
    windows = [s for s in sent if "WITH win" in s]
    # Two windows of 7 for a page of 20 (the third is the rest): each found by its walk
    # alone, no full statement after it.
    assert len(windows) == 2 and all("LIMIT %(p_walk)s" in s for s in windows)


def _windows_sent(db: SessionDB, query: str) -> tuple[list[str], list[int], list[int]]:
    """The window statements one search sends, the rows each walk read, and its hits."""
    from sqlalchemy import event

    sent: list[tuple[str, Any]] = []
    engine = db.store.engine
    catch = lambda *args: sent.append((args[2], args[3]))  # noqa: E731
    event.listen(engine, "before_cursor_execute", catch)
    try:
        hits = [hit["id"] for hit in db.search_messages(query, limit=5)]
    finally:
        event.remove(engine, "before_cursor_execute", catch)
    windows = [(s, params) for s, params in sent if "WITH win" in s]
    walks = [params["p_walk"] for s, params in windows if "LIMIT %(p_walk)s" in s]
    return [s for s, _ in windows], walks, hits


@pytest.fixture
def spread(pg_url: URL, monkeypatch: pytest.MonkeyPatch) -> Iterator[SessionDB]:
    """A phrase in one message of 30 ("slow rollout") and in one of 120 ("cold start")."""
    monkeypatch.setattr(search, "RANK_WINDOW", 7)
    with SessionDB(pg_url.render_as_string(hide_password=False)) as db:
        db.create_session("s", "cli")
        for n in range(480):
            text = f"message {n} rollout slow start cold"
            if n % 30 == 0:
                text += " a slow rollout"
            if n % 120 == 0:
                text += " a cold start"
            db.append_message("s", "user", text)
        yield db


def test_a_sparser_phrase_walks_again_as_far_as_its_density_says(
    spread: SessionDB, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The first walk (140 rows) holds 4 of the window's 7 matches; the second
    # is sized by that density (140 * 7 / 4 * 1.25) and finds the window whole.
    windows, walks, hits = _windows_sent(spread, '"slow rollout"')
    assert walks == [140, 307] and len(windows) == 2  # no full statement
    monkeypatch.setattr(pg_search, "WALK_ROWS_PER_MATCH", 0)  # the full statement alone
    _, full_walks, full_hits = _windows_sent(spread, '"slow rollout"')
    assert hits == full_hits and len(hits) == 5 and full_walks == []


def test_a_phrase_too_sparse_to_walk_to_goes_to_the_full_statement(spread: SessionDB) -> None:
    # One or two matches among the first walk's 140 rows put the window past
    # LONGEST_WALK_ROWS_PER_MATCH rows a match: no second walk.
    windows, walks, hits = _windows_sent(spread, '"cold start"')
    assert len(hits) == 4  # 480 / 120 matches, fewer than a window
    assert walks == [140] and len(windows) == 2


@pytest.mark.parametrize(("found", "rows"), [(0, 0), (1, 0), (2, 0), (3, 409), (4, 307), (6, 205)])
def test_the_second_walk_is_sized_by_the_first_walks_density(found: int, rows: int) -> None:
    # A window of 7 and a first walk of 140 rows: 140 * 7 / found * 1.25, up to 64 * 7.
    assert pg_search._longer_walk(pg_search.WALK_ROWS_PER_MATCH * 7, 7, found) == rows
    assert pg_search._longer_walk(rows or 1, 7, found) == 0  # never a third walk
