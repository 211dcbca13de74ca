"""PostgreSQL's substring scan walks the newest rows first and falls back to the full scan.

A needle the word index cannot answer (PostgreSQL's parser keeps
``src/recvworkerread.sql`` as one token) is found by ``ILIKE``: first among
the newest rows, read from the primary key, and only when they hold less
than the page by the portable statement. Either way the page must be the
newest matches, newest first, exactly once each: these tests build both
cases on a real server and compare against the matches counted in Python.
"""

from __future__ import annotations

from sqlalchemy import create_engine, text
from sqlalchemy.engine import URL
from sqlalchemy.pool import NullPool

from hermes_store import SessionDB
from hermes_store.backends.postgresql.search import SCAN_WALK_ROWS_PER_HIT

NEEDLE = "recvworkerread.sql"


def _fill(url: URL, rows: int, matching: set[int], roles: dict[int, str]) -> None:
    """``rows`` messages in one session; those numbered in ``matching`` name the file."""
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.begin() as connection:
            connection.execute(
                text(
                    "INSERT INTO messages (session_id, role, content, timestamp) "
                    "SELECT 's', CASE WHEN n = ANY(:assistant) THEN 'assistant' ELSE 'user' END, "
                    "CASE WHEN n = ANY(:matching) THEN 'opened src/' || :needle || ' line ' || n "
                    "ELSE 'nothing to see in row ' || n END, n "
                    "FROM generate_series(1, :rows) AS n ORDER BY n"
                ),
                {
                    "rows": rows,
                    "matching": sorted(matching),
                    "assistant": sorted(n for n, role in roles.items() if role == "assistant"),
                    "needle": NEEDLE,
                },
            )
    finally:
        engine.dispose()


def _ids(db: SessionDB, **options: object) -> list[int]:
    return [hit["id"] for hit in db.search_messages(NEEDLE, **options)]  # type: ignore[arg-type]


def test_a_common_needle_is_paged_from_the_newest_rows(pg_url: URL) -> None:
    with SessionDB(pg_url.render_as_string(hide_password=False)) as db:
        db.create_session("s", "cli")
    matching = set(range(3, 600, 7))
    _fill(pg_url, 600, matching, {n: "assistant" for n in range(3, 600, 14)})
    newest = sorted(matching, reverse=True)
    with SessionDB(pg_url.render_as_string(hide_password=False)) as db:
        assert _ids(db, limit=20) == newest[:20]
        assert _ids(db, limit=20, offset=20) == newest[20:40]
        assistant = [n for n in newest if (n - 3) % 14 == 0]
        assert _ids(db, limit=10, role_filter=["assistant"]) == assistant[:10]


def test_matches_older_than_the_walk_come_from_the_full_scan(pg_url: URL) -> None:
    with SessionDB(pg_url.render_as_string(hide_password=False)) as db:
        db.create_session("s", "cli")
    walk = SCAN_WALK_ROWS_PER_HIT * 5  # a page of 5
    rows = walk + 200
    old, new = set(range(10, 40)), {rows - 3, rows - 50}
    _fill(pg_url, rows, old | new, {})
    newest = sorted(old | new, reverse=True)
    with SessionDB(pg_url.render_as_string(hide_password=False)) as db:
        assert _ids(db, limit=5) == newest[:5]
        assert _ids(db, limit=5, offset=5) == newest[5:10]
        assert _ids(db, limit=50) == newest
        assert _ids(db, limit=5, role_filter=["assistant"]) == []
