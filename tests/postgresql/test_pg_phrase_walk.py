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
