"""The ORM side of a unit of work: ``uow.orm``, the relationships, JSON values, exact counters.

Every test runs on real databases, on both backends where the ``db`` fixture
is used. What is checked is what a service relies on: entities come from
``select(Message)``, relationships load only what is asked for, JSON columns
carry Python values while the file keeps the document's TEXT, a flush keeps
``message_count`` and ``tool_call_count`` exact (as ``hermes-store check``
recounts them), the unit's single commit and rollback, the refusals (a read
unit, a file of the agent's own schema), and that the FTS triggers index ORM
rows. Values the database holds are read back with plain SQL on a unit's
connection, never through the mapped classes under test.
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, func, select, text, update
from sqlalchemy.orm import WriteOnlyCollection

from hermes_store import (
    InvalidInputError,
    ReadOnlyStoreError,
    ReadOnlyUnitError,
    SchemaError,
    SessionDB,
    SessionNotFoundError,
    Store,
    StoreError,
    StoreLockedError,
    TitleConflictError,
)
from hermes_store.domain.messages import MessageIn
from hermes_store.domain.usage import UsageReport
from hermes_store.schema.models import Message, Session
from hermes_store.tools.check import check
from hermes_store.uow.orm import UnitSession, tool_calls_counted
from tests.support.legacy_schema import build_legacy_db
from tests.support.upstream_schema import UPSTREAM_VERSIONS, build_upstream_db


# ----------------------------------------------------------------------
# helpers: the database as plain SQL sees it
# ----------------------------------------------------------------------
def raw(store: Store, sql: str, **params: Any) -> list[dict[str, Any]]:
    """Rows of ``sql`` in a read unit of their own (no mapped class involved)."""
    with store.read() as uow:
        return [dict(row) for row in uow.connection.execute(text(sql), params).mappings()]


def counters(store: Store, session_id: str) -> tuple[int, int]:
    (row,) = raw(
        store,
        "SELECT message_count, tool_call_count FROM sessions WHERE id = :id",
        id=session_id,
    )
    return row["message_count"], row["tool_call_count"]


def snapshot(store: Store) -> dict[str, Any]:
    """Every row of both tables, to compare a database with itself before and after."""
    return {
        "sessions": raw(store, "SELECT * FROM sessions ORDER BY id"),
        "messages": raw(store, "SELECT * FROM messages ORDER BY id"),
    }


def assert_counters_exact(store: Store) -> None:
    """What the health check recounts from the messages agrees with every stored counter."""
    report = check(store)
    assert report.miscounted == []
    assert report.stale_fts == []


@pytest.fixture
def store(db: SessionDB) -> Store:
    return db.store


@pytest.fixture
def statements(store: Store) -> Iterator[list[str]]:
    """The SQL SQLAlchemy sends on the store's engine while the test runs."""
    seen: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        seen.append(statement)

    event.listen(store.engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(store.engine, "before_cursor_execute", record)


# ----------------------------------------------------------------------
# entities and relationships
# ----------------------------------------------------------------------
def test_select_message_gives_entities_with_python_values(db: SessionDB, store: Store) -> None:
    db.create_session("s1", source="cli", model="m", model_config={"temperature": 0.2})
    db.append_message("s1", role="user", content="hello")
    db.append_message("s1", role="assistant", tool_calls=[{"id": "c1"}, {"id": "c2"}])
    with store.read() as uow:
        found = uow.orm.scalars(select(Message).order_by(Message.timestamp, Message.id)).all()
        session = uow.orm.get(Session, "s1")
    assert [type(m) for m in found] == [Message, Message]
    assert [(m.role, m.content) for m in found] == [("user", "hello"), ("assistant", None)]
    assert found[1].tool_calls == [{"id": "c1"}, {"id": "c2"}]
    assert found[0].tool_calls is None
    assert session is not None and session.model_config == {"temperature": 0.2}
    assert (session.message_count, session.tool_call_count) == (2, 2)
    # Entities keep their values after the unit (detached, not expired).
    assert found[0].session_id == "s1"


def test_relationships_parent_children_and_message_session(db: SessionDB, store: Store) -> None:
    db.create_session("root", source="cli")
    db.create_session("kid_a", source="cli", parent_session_id="root")
    db.create_session("kid_b", source="cli", parent_session_id="root")
    db.create_session("grandkid", source="cli", parent_session_id="kid_a")
    db.append_message("kid_a", role="user", content="hi")
    with store.read() as uow:
        root = uow.orm.get(Session, "root")
        assert root is not None
        assert [child.id for child in root.children] == ["kid_a", "kid_b"]  # started order
        kid_a = root.children[0]
        assert kid_a.parent is root
        assert [child.id for child in kid_a.children] == ["grandkid"]
        assert kid_a.children[0].parent.parent is root
        assert root.parent is None
        message = uow.orm.scalars(kid_a.messages.select()).one()
        assert message.session is kid_a  # the identity map, not a second copy


def test_messages_are_write_only_and_page_in_timestamp_id_order(
    db: SessionDB, store: Store, statements: list[str]
) -> None:
    db.create_session("big", source="cli")
    db.append_messages("big", [{"role": "user", "content": f"m{i}"} for i in range(120)])
    with store.write() as uow:  # three rows sharing one timestamp: the id breaks the tie
        for i in range(3):
            uow.orm.add(Message(session_id="big", role="user", content=f"tie{i}", timestamp=1.0))
    with store.read() as uow:
        big = uow.orm.get(Session, "big")
        assert big is not None
        statements.clear()
        assert isinstance(big.messages, WriteOnlyCollection)
        with pytest.raises(TypeError):
            iter(big.messages)  # type: ignore[call-overload]
        assert statements == []  # touching the collection loads nothing
        first = uow.orm.scalars(big.messages.select().limit(5)).all()
        page = uow.orm.scalars(big.messages.select().limit(10).offset(50)).all()
        total = uow.orm.scalar(select(func.count()).select_from(big.messages.select().subquery()))
    assert [m.content for m in first] == ["tie0", "tie1", "tie2", "m0", "m1"]
    assert [m.id for m in first[:3]] == sorted(m.id for m in first[:3])
    assert [m.content for m in page] == [f"m{i}" for i in range(47, 57)]
    assert total == 123
    selects = [statement for statement in statements if statement.startswith("SELECT")]
    assert len(selects) == 3  # one statement per page, one for the count


def test_loading_a_session_never_loads_its_messages(
    db: SessionDB, store: Store, statements: list[str]
) -> None:
    db.create_session("s1", source="cli")
    db.append_messages("s1", [{"role": "user", "content": "x"}] * 50)
    with store.read() as uow:
        statements.clear()
        session = uow.orm.scalars(select(Session)).one()
        assert session.children == []
    assert not any("FROM messages" in statement for statement in statements)


def test_messages_added_through_the_collection_and_the_session_attribute(
    db: SessionDB, store: Store
) -> None:
    db.create_session("s1", source="cli")
    with store.write() as uow:
        session = uow.orm.get(Session, "s1")
        assert session is not None
        session.messages.add(Message(role="user", content="via collection", timestamp=1.0))
        uow.orm.add(Message(session=session, role="assistant", content="via attr", timestamp=2.0))
    assert [m["content"] for m in db.get_messages("s1")] == ["via collection", "via attr"]
    assert counters(store, "s1") == (2, 0)


# ----------------------------------------------------------------------
# JSON columns
# ----------------------------------------------------------------------
JSON_VALUES = [
    [{"id": "call_1", "function": {"name": "terminal", "arguments": "{}"}}],
    {"nested": {"list": [1, 2.5, None, True], "text": "naïve 漢字"}},
    "a plain string",
    42,
]


@pytest.mark.parametrize("value", JSON_VALUES, ids=["list", "dict", "str", "int"])
def test_json_columns_round_trip_both_ways(db: SessionDB, store: Store, value: Any) -> None:
    with store.write() as uow:
        uow.orm.add(Session(id="orm", source="cli", model_config=value))
        uow.orm.add(
            Message(
                session_id="orm",
                role="assistant",
                tool_calls=value,
                reasoning_details=value,
                codex_reasoning_items=value,
            )
        )
    # The ORM's values read back through SessionDB ...
    (message,) = db.get_messages("orm")
    assert message["tool_calls"] == value
    assert message["reasoning_details"] == value
    assert message["codex_reasoning_items"] == value
    # ... stored as the text SessionDB itself stores ...
    db.create_session("facade", source="cli", model_config=value)
    db.append_message(
        "facade",
        role="assistant",
        tool_calls=value,
        reasoning_details=value,
        codex_reasoning_items=value,
    )
    stored = raw(store, "SELECT session_id, tool_calls, reasoning_details FROM messages")
    by_session = {row["session_id"]: row for row in stored}
    assert by_session["orm"]["tool_calls"] == by_session["facade"]["tool_calls"]
    assert isinstance(by_session["orm"]["tool_calls"], str)
    configs = {
        r["id"]: r["model_config"] for r in raw(store, "SELECT id, model_config FROM sessions")
    }
    assert configs["orm"] == configs["facade"]
    # ... and SessionDB's values read back through the ORM.
    with store.read() as uow:
        written = uow.orm.scalars(select(Message).where(Message.session_id == "facade")).one()
        assert written.tool_calls == value
        assert written.codex_reasoning_items == value
        assert uow.orm.get(Session, "facade").model_config == value  # type: ignore[union-attr]


def test_empty_json_values_are_stored_as_null(db: SessionDB, store: Store) -> None:
    db.create_session("s1", source="cli")
    with store.write() as uow:
        for empty in ([], {}, "", None):
            uow.orm.add(Message(session_id="s1", role="user", tool_calls=empty))
    rows = raw(store, "SELECT tool_calls FROM messages")
    assert [row["tool_calls"] for row in rows] == [None] * 4
    assert counters(store, "s1") == (4, 0)


def test_json_text_that_is_not_json_reads_as_it_is(db: SessionDB, store: Store) -> None:
    db.create_session("s1", source="cli")
    db.append_message("s1", role="assistant", content="x")
    with store.write() as uow:  # what another program might have written
        uow.connection.execute(text("UPDATE messages SET tool_calls = '{not json'"))
    with store.read() as uow:
        assert uow.orm.scalars(select(Message.tool_calls)).one() == "{not json"


def _nested(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("value", "complaint"),
    [
        ({1, 2}, "not JSON-serializable"),
        ([math.nan], "not JSON-serializable"),
        (_nested(100_000), "nested too deeply"),
    ],
    ids=["set", "nan", "deep"],
)
def test_json_that_cannot_be_stored_is_invalid_input_naming_the_column(
    db: SessionDB, store: Store, value: Any, complaint: str
) -> None:
    db.create_session("s1", source="cli")
    before = snapshot(store)
    with pytest.raises(InvalidInputError, match=complaint) as caught, store.write() as uow:
        uow.orm.add(Message(session_id="s1", role="user", content="kept?"))
        uow.orm.add(Message(session_id="s1", role="user", reasoning_details=value))
    assert "messages.reasoning_details" in str(caught.value)
    assert snapshot(store) == before


def test_regression_batch_append_binds_json_as_stored_text(db: SessionDB) -> None:
    """The batch INSERT bound through the mapped column's type: JSON came back as a string."""
    db.create_session("s1", source="cli")
    db.append_messages(
        "s1",
        [
            {"role": "assistant", "tool_calls": [{"id": "c1"}]},
            {"role": "tool", "content": "ok", "reasoning_details": {"a": 1}},
        ],
    )
    first, second = db.get_messages("s1")
    assert first["tool_calls"] == [{"id": "c1"}]
    assert second["reasoning_details"] == {"a": 1}


# ----------------------------------------------------------------------
# counters
# ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("value", "counted"),
    [(None, 0), ([], 0), ({}, 0), ([1, 2, 3], 3), ((1, 2), 2), ({"id": 1}, 1), ("x", 1), (7, 1)],
)
def test_tool_calls_count_by_the_health_check_rule(value: Any, counted: int) -> None:
    """The ORM, the facades (before storing) and the health check (after) count alike."""
    from hermes_store.domain.arguments import json_arg
    from hermes_store.domain.messages import stored_tool_call_total, tool_call_total

    assert tool_calls_counted(value) == counted
    assert tool_call_total(value) == counted
    stored = json_arg("tool_calls", value)
    assert (0 if stored is None else stored_tool_call_total(stored)) == counted


def test_orm_adds_and_deletes_keep_both_counters_exact(db: SessionDB, store: Store) -> None:
    db.create_session("s1", source="cli")
    db.create_session("s2", source="cli")
    with store.write() as uow:
        for calls in ([{"id": 1}, {"id": 2}, {"id": 3}], {"id": "one"}, "text", [], None):
            uow.orm.add(Message(session_id="s1", role="assistant", tool_calls=calls))
        uow.orm.add(Message(session_id="s2", role="user", content="other"))
    assert counters(store, "s1") == (5, 5)
    assert counters(store, "s2") == (1, 0)
    with store.write() as uow:
        three = uow.orm.scalars(select(Message).where(Message.tool_calls.is_not(None))).first()
        assert three is not None and three.tool_calls == [{"id": 1}, {"id": 2}, {"id": 3}]
        uow.orm.delete(three)
    assert counters(store, "s1") == (4, 2)
    assert_counters_exact(store)


def test_changed_and_moved_messages_move_their_counts(db: SessionDB, store: Store) -> None:
    db.create_session("s1", source="cli")
    db.create_session("s2", source="cli")
    db.append_message("s1", role="assistant", tool_calls=[{"id": 1}, {"id": 2}])
    db.append_message("s1", role="user", content="plain")
    with store.write() as uow:
        calls, plain = uow.orm.scalars(select(Message).order_by(Message.id)).all()
        calls.tool_calls = [{"id": 1}]  # one call fewer
        plain.session = uow.orm.get(Session, "s2")  # moved by relationship
    assert counters(store, "s1") == (1, 1)
    assert counters(store, "s2") == (1, 0)
    with store.write() as uow:
        moved = uow.orm.scalars(select(Message).where(Message.session_id == "s2")).one()
        moved.session_id = "s1"  # moved back by column
        moved.tool_calls = ["a", "b"]
    assert counters(store, "s1") == (2, 3)
    assert counters(store, "s2") == (0, 0)
    assert_counters_exact(store)


def test_counters_stay_exact_mixed_with_the_store_s_own_appends(
    db: SessionDB, store: Store
) -> None:
    db.create_session("s1", source="cli")
    db.append_message("s1", role="user", content="before", tool_calls=["t"])
    with store.write() as uow:
        session = uow.orm.get(Session, "s1")
        assert session is not None and session.message_count == 1
        # What SessionDB.append_message does, in the same unit as ORM writes.
        uow.messages.append("s1", MessageIn("assistant", None, tool_calls=[{"id": 1}, {"id": 2}]))
        uow.orm.add(Message(session=session, role="tool", content="result", tool_calls=[1]))
        uow.orm.flush()
        # The loaded entity reads the counters the flush moved, not its stale copy.
        assert (session.message_count, session.tool_call_count) == (3, 4)
        first = uow.orm.scalars(session.messages.select()).first()
        assert first is not None
        uow.orm.delete(first)
    db.append_message("s1", role="user", content="after")
    assert counters(store, "s1") == (3, 3)
    assert db.message_count("s1") == 3
    assert_counters_exact(store)


def test_a_new_session_with_messages_is_inserted_with_its_counts(
    db: SessionDB, store: Store
) -> None:
    with store.write() as uow:
        session = Session(id="fresh", source="api")
        session.messages.add(Message(role="user", content="one"))
        session.messages.add(Message(role="assistant", tool_calls=[1, 2]))
        uow.orm.add(session)
    assert counters(store, "fresh") == (2, 2)
    assert_counters_exact(store)


def test_a_message_of_an_unknown_session_is_session_not_found(db: SessionDB, store: Store) -> None:
    db.create_session("known", source="cli")
    before = snapshot(store)
    with pytest.raises(SessionNotFoundError, match="'ghost'") as caught, store.write() as uow:
        uow.orm.add(Message(session_id="known", role="user", content="fine"))
        uow.orm.add(Message(session_id="ghost", role="user", content="lost"))
    assert caught.value.session_id == "ghost"
    assert snapshot(store) == before


def test_a_refused_flush_takes_back_its_counter_updates(db: SessionDB, store: Store) -> None:
    """Caught inside the unit, the refusal must not leave the other session's bump behind."""
    db.create_session("known", source="cli")
    with store.write() as uow:
        good = Message(session_id="known", role="user", content="fine")
        bad = Message(session_id="zzz_ghost", role="user", content="lost")  # sorts after
        uow.orm.add_all([good, bad])
        with pytest.raises(SessionNotFoundError):
            uow.orm.flush()
        uow.orm.expunge(bad)
    assert counters(store, "known") == (1, 0)
    assert_counters_exact(store)


# ----------------------------------------------------------------------
# one transaction: the unit's
# ----------------------------------------------------------------------
class Boom(Exception):
    pass


def test_an_exception_rolls_back_everything_counters_included(db: SessionDB, store: Store) -> None:
    db.create_session("s1", source="cli")
    db.create_session("s2", source="cli", parent_session_id="s1")
    db.append_message("s1", role="user", content="keep me", tool_calls=[1])
    before = snapshot(store)
    with pytest.raises(Boom), store.write() as uow:
        uow.orm.add(Message(session_id="s1", role="user", content="orm row"))
        uow.orm.flush()
        uow.orm.delete(uow.orm.scalars(select(Message).where(Message.content == "keep me")).one())
        uow.orm.get(Session, "s1").title = "renamed"  # type: ignore[union-attr]
        uow.messages.append("s2", MessageIn("user", "repository row"))  # one transaction for all
        uow.sessions.record_usage("s2", UsageReport(input_tokens=7))
        uow.orm.commit()  # flushes; commits nothing
        uow.orm.delete(uow.orm.get(Session, "s1"))
        uow.orm.flush()
        raise Boom
    assert snapshot(store) == before
    assert [hit["id"] for hit in db.search_messages("keep")] != []


def test_orm_commit_inside_the_unit_commits_nothing(db: SessionDB, store: Store) -> None:
    db.create_session("s1", source="cli")
    with store.write() as uow:
        uow.orm.add(Message(session_id="s1", role="user", content="pending"))
        uow.orm.commit()
        # Another connection does not see it: the unit's transaction is still open.
        with store.read() as other:
            assert other.messages.count("s1") == 0
        assert uow.messages.count("s1") == 1  # this one does: it was flushed
    assert db.message_count("s1") == 1


def test_orm_rollback_goes_back_to_its_savepoint_and_the_unit_goes_on(
    db: SessionDB, store: Store
) -> None:
    db.create_session("s1", source="cli")
    with store.write() as uow:
        uow.orm.add(Message(session_id="s1", role="user", content="kept"))
        uow.orm.commit()
        uow.orm.add(Message(session_id="s1", role="user", content="undone", tool_calls=[1]))
        uow.orm.flush()
        uow.orm.rollback()
        uow.orm.add(Message(session_id="s1", role="user", content="after"))
    assert [m["content"] for m in db.get_messages("s1")] == ["kept", "after"]
    assert counters(store, "s1") == (2, 0)
    assert_counters_exact(store)


def test_a_failed_flush_swallowed_inside_the_unit_is_not_committed(
    db: SessionDB, store: Store
) -> None:
    db.create_session("s1", source="cli")
    before = snapshot(store)
    with pytest.raises(StoreError, match="failed to flush earlier"), store.write() as uow:
        uow.messages.append("s1", MessageIn("user", "repository row", tool_calls=[{"id": 1}]))
        # Two new sessions with one title: the unique index refuses the flush.
        uow.orm.add_all(
            [Session(id="a", source="x", title="T"), Session(id="b", source="x", title="T")]
        )
        with contextlib.suppress(Exception):  # swallowed, and the session not rolled back
            uow.orm.flush()
    assert snapshot(store) == before


def test_a_failed_flush_rolled_back_takes_its_counter_updates_with_it(
    db: SessionDB, store: Store
) -> None:
    """The counters the flush hook wrote sit inside the ORM's SAVEPOINT, like the rows."""
    db.create_session("s1", source="cli")
    db.set_session_title("s1", "Taken")
    with store.write() as uow:  # the ORM's first use is the failing flush itself
        uow.orm.add(Message(session_id="s1", role="user", content="lost", tool_calls=[1]))
        uow.orm.add_all(
            [Session(id="a", source="x", title="T"), Session(id="b", source="x", title="T")]
        )
        with pytest.raises(Exception, match="UNIQUE|unique"):
            uow.orm.flush()
        uow.orm.rollback()
        uow.orm.add(Message(session_id="s1", role="user", content="kept"))
    assert counters(store, "s1") == (1, 0)
    assert [m["content"] for m in db.get_messages("s1")] == ["kept"]
    assert_counters_exact(store)


def test_orm_after_an_explicit_unit_commit_is_a_new_session(db: SessionDB, store: Store) -> None:
    db.create_session("s1", source="cli")
    with store.write() as uow:
        first = uow.orm
        uow.orm.add(Message(session_id="s1", role="user", content="one"))
        uow.commit()  # flushes the ORM first, then commits the unit's transaction
        with store.read() as other:
            assert other.messages.count("s1") == 1
        assert uow.orm is not first
        uow.orm.add(Message(session_id="s1", role="user", content="two"))
        uow.orm.commit()  # still commits nothing: the unit's next transaction is open
        with store.read() as other:
            assert other.messages.count("s1") == 1
    assert counters(store, "s1") == (2, 0)
    assert db.message_count("s1") == 2


def test_entities_are_usable_after_the_unit(db: SessionDB, store: Store) -> None:
    db.create_session("s1", source="cli")
    with store.write() as uow:
        message = Message(session_id="s1", role="user", content="new", tool_calls=[1])
        uow.orm.add(message)
    assert message.id is not None and message.content == "new"
    assert message.tool_calls == [1]


def test_a_unit_that_never_asks_for_the_orm_makes_no_session(db: SessionDB, store: Store) -> None:
    made: list[object] = []

    def record(session: Any, _transaction: Any) -> None:
        made.append(session)

    event.listen(UnitSession, "after_transaction_create", record)
    try:
        db.create_session("s1", source="cli")
        db.append_message("s1", role="user", content="hot path")
        db.get_messages("s1")
        db.search_messages("hot")
        assert made == []
        with store.read() as uow:
            uow.orm.get(Session, "s1")
        assert made != []
    finally:
        event.remove(UnitSession, "after_transaction_create", record)


def test_an_orm_write_holds_the_unit_s_lock(db: SessionDB, store: Store) -> None:
    """A second writer that will not wait is refused while the ORM's unit is open."""
    db.create_session("s1", source="cli")
    outcome: list[BaseException | None] = []

    def competing_writer() -> None:
        try:
            with store.write(patience_s=0) as uow:
                uow.sessions.record_usage("s1", UsageReport(input_tokens=1))
            outcome.append(None)
        except BaseException as error:  # noqa: BLE001 - the outcome is what is checked
            outcome.append(error)

    with store.write() as uow:
        uow.orm.add(Message(session_id="s1", role="user", content="mine"))
        uow.orm.flush()  # the counter UPDATE holds the row (PostgreSQL) / the file (SQLite)
        thread = threading.Thread(target=competing_writer)
        thread.start()
        thread.join(timeout=30)
    assert len(outcome) == 1 and isinstance(outcome[0], StoreLockedError)
    assert counters(store, "s1") == (1, 0)


# ----------------------------------------------------------------------
# refusals
# ----------------------------------------------------------------------
def test_a_read_unit_s_orm_reads_and_refuses_to_write(db: SessionDB, store: Store) -> None:
    db.create_session("s1", source="cli")
    db.append_message("s1", role="user", content="hello")
    before = snapshot(store)
    attempts = {
        "add": lambda orm: orm.add(Message(session_id="s1", role="user", content="x")),
        "change": lambda orm: setattr(orm.get(Session, "s1"), "title", "New"),
        "delete": lambda orm: orm.delete(orm.scalars(select(Message)).one()),
    }
    for name, attempt in attempts.items():
        with pytest.raises(ReadOnlyUnitError, match="read unit") as caught, store.read() as uow:
            assert uow.orm.get(Session, "s1") is not None
            attempt(uow.orm)
        assert isinstance(caught.value, ReadOnlyStoreError), name
        assert "nothing was written" in str(caught.value)
    with pytest.raises(ReadOnlyUnitError), store.read() as uow:
        uow.orm.execute(update(Session).values(title="bulk"))
    with pytest.raises(ReadOnlyUnitError, match="1 changed"), store.read() as uow:
        uow.orm.get(Session, "s1").model = "changed"  # type: ignore[union-attr]
        uow.orm.scalars(select(Message)).all()  # autoflush meets the change first
    assert snapshot(store) == before


@pytest.mark.parametrize(
    ("make", "column"),
    [
        (lambda: Message(session_id="s1", role=""), "messages.role"),
        (lambda: Message(session_id="s1", role=5), "messages.role"),
        (lambda: Message(session_id="s1", role="user", token_count=-1), "messages.token_count"),
        (lambda: Message(session_id="s1", role="user", timestamp="noon"), "messages.timestamp"),
        (lambda: Message(role="user"), "messages.session_id"),
        (lambda: Session(source="cli"), "sessions.id"),
        (lambda: Session(id="new", source=None), "sessions.source"),
        (lambda: Session(id="new", source="cli", input_tokens=True), "sessions.input_tokens"),
        (lambda: Session(id="new", source="cli", parent_session_id="ghost"), "parent_session_id"),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_bad_values_are_invalid_input_naming_the_column(
    db: SessionDB, store: Store, make: Any, column: str
) -> None:
    db.create_session("s1", source="cli")
    before = snapshot(store)
    with pytest.raises(InvalidInputError) as caught, store.write() as uow:
        uow.orm.add(make())
    assert column in str(caught.value)
    assert snapshot(store) == before


def test_lone_surrogates_are_stored_as_replacement_characters_through_the_orm(
    db: SessionDB, store: Store
) -> None:
    db.create_session("s1", source="cli")
    with store.write() as uow:
        uow.orm.add(
            Message(session_id="s1", role="user", content="a\udcffb", tool_calls=["\ud800"])
        )
        uow.orm.add(Session(id="s2", source="cli", system_prompt="\ud800", title="T\udfff"))
    assert db.get_messages("s1")[-1]["content"] == "a\ufffdb"
    assert db.get_messages("s1")[-1]["tool_calls"] == ["\ufffd"]
    session = db.get_session("s2")
    assert session is not None
    assert (session["system_prompt"], session["title"]) == ("\ufffd", "T\ufffd")
    before = snapshot(store)
    with pytest.raises(InvalidInputError, match="sessions.id"), store.write() as uow:
        uow.orm.add(Session(id="s\ud800", source="cli"))  # a name is never mended
    assert snapshot(store) == before


def test_titles_are_cleaned_and_a_taken_one_is_a_title_conflict(
    db: SessionDB, store: Store
) -> None:
    db.create_session("s1", source="cli")
    db.set_session_title("s1", "Fix Docker Build")
    with store.write() as uow:
        uow.orm.add(Session(id="s2", source="cli", title="  Second\u200b  title\n"))
    assert db.get_session_title("s2") == "Second title"
    with pytest.raises(TitleConflictError, match="s1"), store.write() as uow:
        uow.orm.get(Session, "s2").title = "Fix Docker Build"  # type: ignore[union-attr]
    with pytest.raises(InvalidInputError, match="too long"), store.write() as uow:
        uow.orm.get(Session, "s2").title = "x" * 101  # type: ignore[union-attr]
    assert db.get_session_title("s2") == "Second title"


def test_orm_bulk_statements_are_refused(db: SessionDB, store: Store) -> None:
    db.create_session("s1", source="cli")
    db.append_message("s1", role="user", content="x")
    before = snapshot(store)
    with store.write() as uow:
        session = uow.orm.get(Session, "s1")
        assert session is not None
        for statement in (
            update(Message).values(content="bulk"),
            session.messages.delete(),
            session.messages.insert().values(role="user", timestamp=1.0),
        ):
            with pytest.raises(InvalidInputError, match="bulk"):
                uow.orm.execute(statement)
        with pytest.raises(InvalidInputError, match="bulk_save_objects"):
            uow.orm.bulk_save_objects([Message(session_id="s1", role="user")])
    assert snapshot(store) == before


# ----------------------------------------------------------------------
# deleting a session, search
# ----------------------------------------------------------------------
def test_deleting_a_session_deletes_its_messages_and_frees_its_children(
    db: SessionDB, store: Store
) -> None:
    db.create_session("root", source="cli")
    db.create_session("kid", source="cli", parent_session_id="root")
    db.create_session("grandkid", source="cli", parent_session_id="kid")
    db.append_messages("root", [{"role": "user", "content": "quokka"}] * 3)
    db.append_message("kid", role="user", content="kid stays")
    with store.write() as uow:
        root = uow.orm.get(Session, "root")
        one = uow.orm.scalars(root.messages.select()).first()  # type: ignore[union-attr]
        uow.orm.delete(one)  # deleted explicitly in the same flush, too
        uow.orm.delete(root)
    assert db.get_session("root") is None
    assert db.message_count("root") == 0
    assert db.get_session("kid")["parent_session_id"] is None  # type: ignore[index]
    assert db.get_session("grandkid")["parent_session_id"] == "kid"  # type: ignore[index]
    assert [m["content"] for m in db.get_messages("kid")] == ["kid stays"]
    assert db.search_messages("quokka") == []
    assert_counters_exact(store)


def test_search_finds_messages_the_orm_added_and_not_those_it_deleted(
    db: SessionDB, store: Store
) -> None:
    db.create_session("s1", source="cli")
    with store.write() as uow:
        uow.orm.add(Message(session_id="s1", role="user", content="the axolotl migration plan"))
        uow.orm.add(Message(session_id="s1", role="user", content="the okapi rollout"))
    hits = db.search_messages("axolotl")
    assert [hit["session_id"] for hit in hits] == ["s1"]
    assert ">>>axolotl<<<" in hits[0]["snippet"]
    with store.write() as uow:
        okapi = uow.orm.scalars(select(Message).where(Message.content.contains("okapi"))).one()
        okapi.content = "the narwhal rollout"  # an UPDATE: the index follows it too
    assert db.search_messages("okapi") == []
    assert [hit["session_id"] for hit in db.search_messages("narwhal")] == ["s1"]
    with store.write() as uow:
        uow.orm.delete(
            uow.orm.scalars(select(Message).where(Message.content.contains("axolotl"))).one()
        )
    assert db.search_messages("axolotl") == []
    assert_counters_exact(store)


# ----------------------------------------------------------------------
# files of the agent's own schema versions
# ----------------------------------------------------------------------
@pytest.mark.sqlite_only("files of the Hermes agent's own SQLite schema versions")
@pytest.mark.parametrize("version", UPSTREAM_VERSIONS)
def test_agent_files_orm_reads_where_faithful_and_never_writes(
    tmp_path: Path, version: int
) -> None:
    path = build_upstream_db(tmp_path / f"v{version}.db", version)
    with Store(path) as store:
        before = snapshot(store)
        if store.layout.tracks_active or store.layout.system_prompts:
            # v25: inactive rows and prompts by hash -- the ORM would read what the agent hides.
            for unit in (store.read, store.write):
                with pytest.raises(SchemaError, match=f"schema_version {version}"), unit() as uow:
                    uow.orm  # noqa: B018 - asking is what is refused
            with pytest.raises(SchemaError, match="'active' flag"), store.read() as uow:
                uow.orm  # noqa: B018
        else:
            facade = SessionDB(store=store)
            with store.read() as uow:
                root = uow.orm.get(Session, "up_root")
                assert root is not None and root.model_config == {"temperature": 0.2}
                assert [c.id for c in root.children] == ["up_child"]
                contents = [m.content for m in uow.orm.scalars(root.messages.select())]
            assert contents == [m["content"] for m in facade.get_messages("up_root")]
            refused = f"agent's schema_version {version}"
            with pytest.raises(SchemaError, match=refused), store.write() as uow:
                uow.orm.add(Message(session_id="up_root", role="user", content="no"))
            with pytest.raises(SchemaError, match="nothing was written"), store.write() as uow:
                uow.orm.get(Session, "up_root").title = "no"  # type: ignore[union-attr]
        assert snapshot(store) == before


@pytest.mark.sqlite_only("a file the old sqlite3 code left at schema version 3")
def test_an_old_file_read_without_migrating_is_refused_by_name(tmp_path: Path) -> None:
    path = build_legacy_db(tmp_path / "v3.db", 3)
    with Store(path, read_only=True) as store:
        with pytest.raises(SchemaError, match="not migrated") as caught, store.read() as uow:
            uow.orm  # noqa: B018 - asking is what is refused
        assert "sessions.billing_provider" in str(caught.value)
        with store.read() as uow:  # the repositories read it as migrating would fill it
            assert uow.sessions.count() > 0
