"""PostgreSQL plans every search statement for its own parameters (never a generic plan).

psycopg prepares a statement on the server after a few executions, and the
server may then run one generic plan for every parameter: for a rank window
that is the plan of the words searched before (a walk of the whole table for
a rare word after common ones). The store's search statements are sent
unprepared; its other statements still are prepared.
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.engine import URL

from hermes_store import SessionDB
from hermes_store.backends.postgresql.plans import CUSTOM_PLAN


def test_search_statements_are_never_prepared_and_others_are(pg_url: URL) -> None:
    with SessionDB(pg_url.render_as_string(hide_password=False)) as db:
        db.create_session("s", "cli")
        for n in range(12):
            db.append_message("s", "user", f"docker build failed {n} 服务端")
        with db.store.read() as unit:
            search = unit.search
            for _ in range(12):  # past psycopg's prepare threshold on this one connection
                for query in ("docker", '"build failed"', "zephyrquill", "服务端", "uild fai"):
                    search.search(query)
                    search.search(query, role_filter=["user"], source_filter=["cli"])
            prepared = (
                unit.connection.execute(text("SELECT statement FROM pg_prepared_statements"))
                .scalars()
                .all()
            )
    assert not [s for s in prepared if CUSTOM_PLAN.strip() in s]
    assert not [s for s in prepared if "content_tsv" in s or "ILIKE" in s]
    assert any("unnest" in s for s in prepared)  # the hit list is prepared as usual
