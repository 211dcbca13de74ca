"""Filtered searches on PostgreSQL find what SQLite finds, whatever order their tests run in.

The pair route tests the role and the source before the needles (inside the
candidates' fence) and the last rank window runs with its own ``work_mem``:
both change only how the rows are found, so every filter combination must
give SQLite's hits, on a store where the needles, roles and sources cross.
The ``work_mem`` of the last window is set inside its transaction, so it must
also hold, and be gone after, through PgBouncer's transaction pooling.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.engine import URL

from hermes_store import SessionDB
from hermes_store.backends.postgresql.search import (
    LAST_WINDOW_WORK_MEM,
    last_window_statement,
    read_window,
)
from hermes_store.backends.postgresql.tsquery import tsquery_text

TEXTS = ("nginx 配置 ok", "配置 only", "nginx only", "docker 服务端 up", "服务端 docker", "other")
ROLES = ("user", "assistant", "tool")
SOURCES = ("cli", "telegram", "discord")
FILTERS: list[dict[str, Any]] = [
    {},
    {"role_filter": ["user"]},
    {"source_filter": ["telegram", "discord"]},
    {"source_filter": ["telegram", "discord"], "role_filter": ["user"]},
    {"exclude_sources": ["cli"], "role_filter": ["user", "tool"]},
    {"exclude_sources": ["telegram"]},
]
QUERIES = ("nginx 配置", "docker 服务端", "配置 OR 服务端", '"docker up"', "配置")


def fill(db: SessionDB) -> None:
    for s, source in enumerate(SOURCES * 3):
        db.create_session(f"s{s}", source)
        for n in range(24):
            db.append_message(f"s{s}", ROLES[(n + s) % 3], f"{TEXTS[(n * 5 + s) % 6]} {n}")
    db.append_message("s1", "user", "the docker up again")


@pytest.fixture
def stores(
    pg_url: URL, pg_route: Callable[[URL], URL], tmp_path: Path
) -> Iterator[tuple[SessionDB, SessionDB]]:
    """SQLite and PostgreSQL, the latter straight or through PgBouncer (transaction pooling)."""
    with (
        SessionDB(tmp_path / "state.db") as lite,
        SessionDB(pg_route(pg_url).render_as_string(hide_password=False)) as pg,
    ):
        fill(lite)
        fill(pg)
        yield lite, pg


@pytest.mark.parametrize("query", QUERIES)
def test_every_filter_finds_what_sqlite_finds(
    stores: tuple[SessionDB, SessionDB], query: str
) -> None:
    lite, pg = stores
    pages: list[dict[str, Any]] = [{"limit": 5}, {"limit": 5, "offset": 5}, {"limit": 200}]
    for filters in FILTERS:
        for page in pages:
            want = {h["id"] for h in lite.search_messages(query, **filters, **page)}
            got = {h["id"] for h in pg.search_messages(query, **filters, **page)}
            assert got == want, (query, filters, page)
        assert want or filters, query  # the unfiltered query finds something


def test_the_last_window_runs_with_its_work_mem_and_puts_it_back(
    stores: tuple[SessionDB, SessionDB],
) -> None:
    _, pg = stores
    statement = last_window_statement(False, False, True)
    params: dict[str, Any] = {"p_query": tsquery_text(["docker"]), "p_high": 2**63 - 1}
    params.update(p_limit=20, p_roles=["user"])
    seen: list[Any] = []
    with pg.store.engine.connect() as connection:
        before = connection.exec_driver_sql("SHOW work_mem").scalar()
        plain = connection.execute(statement, {**params, "p_window": None}).mappings().all()

        def during(*args: Any) -> None:
            if "WITH page AS" in args[2]:
                seen.append(connection.exec_driver_sql("SHOW work_mem").scalar())

        event.listen(connection, "before_cursor_execute", during)
        page, low = read_window(connection, statement, statement, params, None)
        event.remove(connection, "before_cursor_execute", during)
        after = connection.exec_driver_sql("SHOW work_mem").scalar()
    assert seen == [LAST_WINDOW_WORK_MEM] != [before]
    assert after == before
    assert low is None
    assert [h["id"] for h in page] == [h["id"] for h in plain] != []
