"""The fast paths: prepared statements, kept connections, a cheap open, shared engines.

They trade SQLAlchemy's per-call machinery for less work; these tests hold
them to the same behaviour as the machinery they bypass.
"""

from __future__ import annotations

import decimal
import threading
from contextlib import closing
from pathlib import Path

import pytest
from sqlalchemy import bindparam, func, select
from sqlalchemy.exc import IntegrityError, StatementError

from hermes_store import SessionDB, Store
from hermes_store.backends.prepared import Prepared
from hermes_store.backends.sqlite.library import driver as sqlite3
from hermes_store.repositories.messages import MESSAGE_FIELDS, insert_rows
from hermes_store.repositories.sessions import insert_session_row
from hermes_store.schema.state import read_state
from hermes_store.schema.tables import sessions_table
from tests.support.processes import probe_output

S = sessions_table


def _session(session_id: str, started_at: float, **fields: object) -> dict[str, object]:
    """A ``sessions`` row as the low-level insert takes it (every documented column)."""
    row: dict[str, object] = {column.name: None for column in S.columns}
    row.update(id=session_id, source="cli", started_at=started_at, **fields)
    return row


def _row(session_id: str, content: str = "x") -> dict[str, object]:
    row: dict[str, object] = dict.fromkeys(MESSAGE_FIELDS)
    row.update(session_id=session_id, role="user", content=content, timestamp=1.5)
    return row


# ----------------------------------------------------------------------
# Prepared
# ----------------------------------------------------------------------
def test_prepared_answers_like_sqlalchemy(db_path: Path) -> None:
    with Store(db_path) as store:
        with store.write() as uow:
            insert_session_row(uow.connection, uow.layout, _session("a", 3.0, title="T"))
            insert_session_row(uow.connection, uow.layout, _session("b", 4.0))
        statement = select(S.c.id, S.c.started_at, S.c.title).where(
            S.c.source == bindparam("p_source")
        )
        prepared = Prepared(statement.order_by(S.c.id))
        with store.read() as uow:
            fast = prepared.dicts(uow.connection, {"p_source": "cli"})
            slow = [
                dict(r)
                for r in uow.connection.execute(
                    statement.order_by(S.c.id), {"p_source": "cli"}
                ).mappings()
            ]
            assert (
                fast
                == slow
                == [
                    {"id": "a", "started_at": 3.0, "title": "T"},
                    {"id": "b", "started_at": 4.0, "title": None},
                ]
            )
            assert prepared.first(uow.connection, {"p_source": "none"}) is None
            assert prepared.scalar(uow.connection, {"p_source": "cli"}) == "a"


def test_prepared_applies_bind_processors_and_literal_values(db: SessionDB) -> None:
    db.create_session("s", "cli")
    with db.store.write() as uow:
        # started_at is REAL: an int goes through SQLAlchemy's float processor (a plain
        # execute; the Prepared paths: test_prepared_statements_apply_the_columns_bind_processors).
        insert_session_row(uow.connection, uow.layout, _session("int-time", 7))
        # COALESCE(message_count, 0) + :p_messages: a literal bind beside the parameters
        uow.messages.append_many(
            "s",
            [
                {"role": "assistant", "tool_calls": [{"id": "a"}, {"id": "b"}]},
                {"role": "assistant", "tool_calls": [{"id": "c"}]},
            ],
        )
    with db.store.read() as uow:
        row = uow.sessions.get("int-time")
        counted = uow.sessions.get("s")
    assert row is not None and isinstance(row.started_at, float)
    assert counted is not None and (counted.message_count, counted.tool_call_count) == (2, 3)


def test_prepared_errors_are_sqlalchemy_errors_and_roll_back(db: SessionDB) -> None:
    db.create_session("s", "cli")
    with pytest.raises(IntegrityError), db.store.write() as uow:
        insert_rows(uow.connection, uow.layout, [_row("s", "kept out")])
        insert_rows(uow.connection, uow.layout, [_row("no-such-session")])  # foreign key
    assert db.get_messages("s") == [], "the first insert of the failed unit is rolled back"


def test_prepared_insert_keeps_a_given_id(db: SessionDB) -> None:
    db.create_session("s", "cli")
    with db.store.write() as uow:
        assert insert_rows(uow.connection, uow.layout, [{**_row("s"), "id": 41}]) == [41]
        if db.store.url.get_backend_name() == "sqlite":
            # AUTOINCREMENT continues after it; a PostgreSQL identity is moved
            # past copied ids by the copy itself (tests/store/test_copy.py).
            assert insert_rows(uow.connection, uow.layout, [_row("s")]) == [42]
    assert [m["id"] for m in db.get_messages("s")][0] == 41


def test_prepared_inserted_id_is_the_stored_row_id(db: SessionDB) -> None:
    # SQLite answers from the cursor's lastrowid, PostgreSQL through RETURNING:
    # either way the id names the row that was written, in order.
    db.create_session("s", "cli")
    with db.store.write() as uow:
        ids = [insert_rows(uow.connection, uow.layout, [_row("s", f"m{i}")])[0] for i in range(3)]
    stored = db.get_messages("s")
    assert ids == sorted(ids) and len(set(ids)) == 3
    assert [(m["id"], m["content"]) for m in stored] == list(
        zip(ids, ["m0", "m1", "m2"], strict=True)
    )


@pytest.mark.parametrize("ids", ["none", "all", "some"])
def test_add_many_stores_rows_with_the_ids_it_returns(db: SessionDB, ids: str) -> None:
    # Rows all without ids, all with ids (imports, copies) and a mix take
    # different paths on SQLite; each must return the ids the rows were stored under.
    db.create_session("s", "cli")
    rows = [_row("s", f"m{i}") for i in range(5)]
    if ids != "none":
        for i, row in enumerate(rows):
            if ids == "all" or i % 2:
                row["id"] = 100 + 10 * i
    with db.store.write() as uow:
        returned = insert_rows(uow.connection, uow.layout, rows)
    stored = {m["id"]: m["content"] for m in db.get_messages("s")}
    assert stored == dict(zip(returned, [f"m{i}" for i in range(5)], strict=True))
    if ids == "all":
        assert returned == [100, 110, 120, 130, 140]


def test_prepared_refuses_an_order_its_placeholders_do_not_follow(db: SessionDB) -> None:
    db.create_session("s", "cli")
    statement = select(S.c.id).where(S.c.id == bindparam("a"), S.c.source == bindparam("b"))
    with db.store.read() as uow:
        if uow.connection.dialect.name != "sqlite":
            with pytest.raises(TypeError, match="needs SQLite"):
                Prepared(statement, order=["a", "b"]).last_rowid(uow.connection, ["s", "cli"])
            return
        with pytest.raises(TypeError, match="do not follow"):
            Prepared(statement, order=["b", "a"]).last_rowid(uow.connection, ["cli", "s"])


def test_prepared_takes_statements_with_no_or_one_parameter(db: SessionDB) -> None:
    db.create_session("s", "cli")
    db.create_session("t", "cli")
    count = Prepared(select(func.count()).select_from(S))
    one = Prepared(select(S.c.source).where(S.c.id == bindparam("p_id")))
    with db.store.read() as uow:
        assert count.scalar(uow.connection, {}) == 2
        assert one.rows(uow.connection, {"p_id": "t"}) == [("cli",)]
        assert one.rows(uow.connection, {"p_id": "nope"}) == []


def test_prepared_rejects_a_missing_parameter(db: SessionDB) -> None:
    prepared = Prepared(select(S.c.id).where(S.c.id == bindparam("p_id")))
    # KeyError from the SQLite fast path, StatementError from SQLAlchemy's.
    with pytest.raises((KeyError, StatementError), match="p_id"), db.store.read() as uow:
        prepared.rows(uow.connection, {})


# ----------------------------------------------------------------------
# kept connections
# ----------------------------------------------------------------------
def test_a_thread_reuses_one_connection_across_units(db: SessionDB) -> None:
    with db.store.read() as uow:
        first = uow.connection
    with db.store.write() as uow:
        assert uow.connection is first
    assert db.store.engine.pool.checkedout() == 1, "kept, not returned, between units"


def test_units_on_a_kept_connection_share_its_repositories_for_one_layout(db: SessionDB) -> None:
    db.create_session("s", "cli")
    with db.store.write() as uow:
        sessions, messages = uow.sessions, uow.messages
    with db.store.write() as uow:
        assert uow.messages is messages and uow.sessions is sessions
    with db.store.read() as uow:
        spare = db.store.write()  # the kept connection is busy: a spare, its own repositories
        with spare as inner:
            assert inner.messages is not messages and inner.connection is not uow.connection


def test_an_invalidated_kept_connection_reconnects_and_the_next_append_lands(
    db: SessionDB, db_path: Path
) -> None:
    """What a unit reads once per kept connection (its driver, rules) follows a reconnect."""
    db.create_session("s", "cli")
    db.append_message("s", "user", "one")
    with db.store.write() as uow:
        kept = uow.connection
        old_driver = kept.connection.driver_connection
        messages = uow.messages
    kept.invalidate()  # the kept connection: closed under the store, between units
    db.append_message("s", "user", "two")
    with db.store.write() as uow:
        assert uow.connection.connection.driver_connection is not old_driver
        assert uow.messages is not messages, "repositories are rebuilt with the connection"
    assert [m["content"] for m in db.get_messages("s")] == ["one", "two"]
    raw = sqlite3.connect(db_path)
    try:
        assert raw.execute("SELECT message_count FROM sessions WHERE id = 's'").fetchone() == (2,)
    finally:
        raw.close()


def test_a_unit_inside_a_unit_gets_a_spare_connection_closed_afterwards(db: SessionDB) -> None:
    db.create_session("s", "cli")
    pool = db.store.engine.pool
    exported = db.iter_export()
    first = next(exported)  # the export's read unit stays open on the kept connection
    db.append_message("s", "user", "written while an export is open")
    assert pool.checkedout() == 1, "the spare went back to the pool"
    assert first["messages"] == [] and list(exported) == []
    assert [m["content"] for m in db.get_messages("s")] == ["written while an export is open"]


def test_each_thread_has_its_own_connection_returned_when_it_ends(db: SessionDB) -> None:
    db.create_session("s", "cli")
    pool = db.store.engine.pool
    with db.store.read() as uow:
        main_connection = uow.connection
    seen: list[object] = []
    errors: list[BaseException] = []

    def worker(index: int) -> None:
        try:
            for n in range(20):
                db.append_message("s", "user", f"t{index}-{n}")
            with db.store.read() as uow:
                seen.append(uow.connection)
        except BaseException as error:  # reported to the main thread
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len({id(c) for c in seen}) == 4 and all(c is not main_connection for c in seen)
    assert db.message_count("s") == 80
    seen.clear()  # the threads' own references; their locals are gone already
    assert pool.checkedout() == 1, "only the main thread still keeps one"


def test_close_releases_kept_connections_of_every_thread(db_path: Path) -> None:
    store = Store(db_path)
    kept_in_thread = threading.Event()
    release = threading.Event()

    def worker() -> None:
        with store.read():
            pass
        kept_in_thread.set()
        release.wait(10)

    thread = threading.Thread(target=worker)
    thread.start()
    kept_in_thread.wait(10)
    assert store.engine.pool.checkedout() == 2
    store.close()
    assert store.engine.pool.checkedout() == 0
    release.set()
    thread.join()
    with store.read() as uow:  # a closed store reconnects on demand
        assert uow.sessions.count() == 0
    store.close()


# ----------------------------------------------------------------------
# open
# ----------------------------------------------------------------------
def test_stores_on_one_database_share_an_engine_and_close_independently(db_path: Path) -> None:
    first, second = Store(db_path), Store(db_path)
    assert first.engine is second.engine
    with first.write() as uow:
        uow.sessions.create("s", "cli")
    first.close()
    with second.read() as uow:
        assert uow.sessions.exists("s")
    second.close()
    assert Store(db_path.with_name("other.db")).engine is not first.engine


def test_opening_a_current_database_imports_no_alembic_and_writes_nothing(db_path: Path) -> None:
    SessionDB(db_path).close()
    before = db_path.read_bytes()
    probe = (
        "import sys\n"
        "from hermes_store import SessionDB\n"
        f"db = SessionDB({str(db_path)!r})\n"
        "assert db.get_session('none') is None\n"
        "db.close()\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'alembic'))\n"
    )
    assert probe_output(probe, timeout=60) == "[]"
    assert db_path.read_bytes() == before


def test_schema_state_falls_back_when_a_state_table_is_missing(tmp_path: Path) -> None:
    empty, legacy = tmp_path / "empty.db", tmp_path / "legacy.db"
    with closing(sqlite3.connect(legacy)) as raw:  # the old code's files have no alembic_version
        raw.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
        raw.execute("INSERT INTO schema_version VALUES (3)")
        raw.commit()
    for path, expected in ((empty, (None, None)), (legacy, (3, None))):
        with Store(path, migrate=False) as store, store.read() as uow:
            assert read_state(uow.connection) == expected
            assert uow.connection.exec_driver_sql("SELECT 1").scalar() == 1, "still usable"


def test_prepared_statements_apply_the_columns_bind_processors(db_path: Path) -> None:
    """A REAL column's processor turns a Decimal into a float on the Prepared paths too.

    The one-message INSERT, the multi-row turn INSERT and the counters UPDATE
    run on the driver; without the processors sqlite3 refuses a Decimal
    ("type 'decimal.Decimal' is not supported").
    """
    db = SessionDB(db_path, clock=lambda: decimal.Decimal("1700000000.25"))
    db.create_session("s", "cli")
    db.append_message("s", "user", "one")
    db.append_messages("s", [{"role": "user", "content": "turn"}] * 3)
    db.close()
    with closing(sqlite3.connect(db_path)) as connection:
        stored = connection.execute("SELECT typeof(timestamp), timestamp FROM messages").fetchall()
    assert stored == [("real", 1700000000.25)] * 4


def test_an_insert_that_fails_after_the_counter_update_leaves_the_counters(
    db_path: Path,
) -> None:
    """The second append runs on the repositories the first left, and fails at its INSERT.

    Another program's trigger refuses the row after the counter UPDATE ran
    in the same transaction: the unit rolls both back, so the session's
    counters and messages are what they were.
    """
    with SessionDB(db_path) as db:
        db.create_session("s", "cli")
        db.append_message("s", "user", "kept", tool_calls=[{"id": "a"}])
        raw = sqlite3.connect(db_path)
        try:
            raw.execute(
                "CREATE TRIGGER refuse_second BEFORE INSERT ON messages "
                "BEGIN SELECT RAISE(ABORT, 'refused by another program'); END"
            )
            raw.commit()
        finally:
            raw.close()
        with pytest.raises(IntegrityError, match="refused by another program"):
            db.append_message("s", "assistant", "lost", tool_calls=[{"id": "b"}])
        session = db.get_session("s")
        assert (session["message_count"], session["tool_call_count"]) == (1, 1)
        assert [m["content"] for m in db.get_messages("s")] == ["kept"]
