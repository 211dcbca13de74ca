"""PostgreSQL's reports read indexes, not the whole table (issue #28, item 3).

Plans, not timings: on a table large enough for an index to pay, the
statement's plan names the index that answers it.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

from hermes_store import SessionDB
from hermes_store.backends import BACKENDS


def _plan(url: Any, sql: str, params: dict[str, Any]) -> str:
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.begin() as connection:
            connection.execute(text("ANALYZE sessions"))
            rows = connection.execute(text("EXPLAIN " + sql), params).scalars()
            return "\n".join(rows)
    finally:
        engine.dispose()


def test_a_title_lineage_is_a_range_of_an_index_under_the_database_collation(
    pg_url: Any,
) -> None:
    with SessionDB(pg_url) as db:
        db.create_session("base", "cli")
        db.set_session_title("base", "nightly report")
        for n in range(1, 21):
            db.create_session(f"s{n}", "cli")
            db.set_session_title(f"s{n}", f"nightly report #{n + 1}")
        assert db.get_next_title_in_lineage("nightly report") == "nightly report #22"
    engine = create_engine(pg_url, poolclass=NullPool)
    try:
        with engine.begin() as connection:  # 20,000 other titled sessions, other lineages
            connection.execute(
                text(
                    "INSERT INTO sessions (id, source, started_at, title) "
                    "SELECT 'o' || n, 'cli', n, 'task ' || (n % 97) || ' #' || n "
                    "FROM generate_series(1, 20000) AS n"
                )
            )
    finally:
        engine.dispose()
    plan = _plan(
        pg_url,
        BACKENDS["postgresql"].title_family_sql(),
        BACKENDS["postgresql"].title_family_params("nightly report"),
    )
    assert "idx_sessions_title_pattern" in plan and "Seq Scan" not in plan, plan
