"""Revision 0018: PostgreSQL's CJK pair index holds what SQLite's holds, kept by its triggers.

The pairs PostgreSQL cuts in SQL must be :func:`hermes_store.domain.bigrams.grams`
of the same text (the search's recall rests on it); the triggers must follow
every insert, update and delete; the revision's back-fill must give the same
table as the triggers; and a CJK search must read the index.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import text
from sqlalchemy.engine import URL, Connection

from hermes_store import SessionDB
from hermes_store.backends.postgresql.cjk_pairs import BACKFILL, PAIRS, TABLE_NAME
from hermes_store.domain.bigrams import RANGES, grams

CJK = st.sampled_from(
    [chr(low) for low, _ in RANGES]
    + [chr(high) for _, high in RANGES]
    + list("服务端问题数据库서버")
)
TEXTS = st.lists(
    st.one_of(CJK, st.sampled_from(list("ab 1.\n-é€😀")), st.characters(codec="utf-8")),
    max_size=60,
).map("".join)


@pytest.fixture
def pg(pg_url: URL) -> Iterator[SessionDB]:
    with SessionDB(pg_url.render_as_string(hide_password=False)) as db:
        yield db


def table(connection: Connection) -> set[tuple[str, int]]:
    rows = connection.execute(text(f"SELECT gram, message_id FROM {TABLE_NAME}"))
    return {(gram, message_id) for gram, message_id in rows}


def expected(connection: Connection) -> set[tuple[str, int]]:
    rows = connection.execute(text("SELECT id, content FROM messages WHERE content IS NOT NULL"))
    return {(gram, message_id) for message_id, content in rows for gram in grams(content)}


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(content=TEXTS)
def test_sql_pairs_are_the_domain_pairs(pg: SessionDB, content: str) -> None:
    content = content.replace("\x00", "")  # PostgreSQL text holds no NUL
    with pg.store.read() as unit:
        found = unit.connection.execute(text(f"SELECT {PAIRS}(:t)"), {"t": content}).scalars().all()
    assert sorted(found) == sorted(grams(content))


def test_a_long_run_is_cut_into_every_pair(pg: SessionDB) -> None:
    run = "".join(chr(0x4E00 + n) for n in range(5_000))
    with pg.store.read() as unit:
        found = unit.connection.execute(text(f"SELECT {PAIRS}(:t)"), {"t": run}).scalars().all()
    assert sorted(found) == sorted(grams(run)) and len(found) == 4_999


def test_triggers_follow_every_write(pg: SessionDB) -> None:
    pg.create_session("s", "cli")
    ids = [
        pg.append_message("s", "user", content)
        for content in ("服务端出了问题", "plain latin", None, "数据库 服务端", "서버 재시작")
    ]
    with pg.store.write() as unit:
        c = unit.connection
        assert table(c) == expected(c) != set()
        c.execute(text("UPDATE messages SET content = 'now latin' WHERE id = :i"), {"i": ids[0]})
        c.execute(text("UPDATE messages SET content = '问题来了' WHERE id = :i"), {"i": ids[1]})
        c.execute(text("UPDATE messages SET content = '服务器' WHERE id = :i"), {"i": ids[2]})
        c.execute(text("DELETE FROM messages WHERE id = :i"), {"i": ids[3]})
        c.execute(text("UPDATE messages SET id = 100 WHERE id = :i"), {"i": ids[4]})
        assert table(c) == expected(c)
        assert ("服务", ids[0]) not in table(c) and ("问题", ids[1]) in table(c)
        assert ("서버", 100) in table(c)


def test_the_backfill_gives_what_the_triggers_keep(pg: SessionDB) -> None:
    pg.create_session("s", "cli")
    for n in range(40):
        pg.append_message("s", "user", f"第{n}个问题 about 服务端 and データベース {n}")
    with pg.store.write() as unit:
        c = unit.connection
        kept = table(c)
        c.execute(text(f"DELETE FROM {TABLE_NAME}"))
        c.execute(text(BACKFILL))
        assert table(c) == kept == expected(c)


def test_a_cjk_search_reads_the_pair_index(pg: SessionDB) -> None:
    from sqlalchemy import event

    pg.create_session("s", "cli")
    for n in range(30):
        pg.append_message("s", "user", "服务端 ok" if n % 3 else "客户端 only")
    sent: list[str] = []
    engine = pg.store.engine
    catch = lambda *args: sent.append(args[2])  # noqa: E731
    event.listen(engine, "before_cursor_execute", catch)
    try:
        hits = pg.search_messages("服务端")
        assert len(pg.search_messages("问题")) == 0
    finally:
        event.remove(engine, "before_cursor_execute", catch)
    assert len(hits) == 20
    assert any(TABLE_NAME in statement and "ILIKE" in statement for statement in sent)
