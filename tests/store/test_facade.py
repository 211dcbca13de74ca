"""Every public method of ``SessionDB`` and its documented behaviour, on real SQLite files.

Tests named ``test_regression_*`` pin defects found and fixed in the package.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.exc import DBAPIError

from hermes_store import (
    InvalidInputError,
    SessionDB,
    SessionExistsError,
    SessionNotFoundError,
    Store,
)
from hermes_store.backends.sqlite.library import driver as sqlite3
from hermes_store.repositories.messages import BATCH_ROWS
from hermes_store.tools.check import check

DAY = 86400.0


# ----------------------------------------------------------------------
# helpers: look at the database with plain SQL, not through the package
# (plain sqlite3 on a file; a connection of its own on PostgreSQL)
# ----------------------------------------------------------------------
Target = Path | SessionDB


def raw_rows(target: Target, sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
    path = target.db_path if isinstance(target, SessionDB) else target
    if path is None:
        assert isinstance(target, SessionDB)
        with target.store.engine.connect() as connection:
            result = connection.exec_driver_sql(sql.replace("?", "%s"), params)
            return [dict(row) for row in result.mappings()]
    with closing(sqlite3.connect(path)) as connection:
        connection.row_factory = sqlite3.Row
        return [dict(row) for row in connection.execute(sql, params)]


def raw_session(target: Target, session_id: str) -> dict[str, Any] | None:
    rows = raw_rows(target, "SELECT * FROM sessions WHERE id = ?", (session_id,))
    return rows[0] if rows else None


def raw_message_count(target: Target, session_id: str | None = None) -> int:
    if session_id is None:
        return raw_rows(target, "SELECT COUNT(*) AS n FROM messages")[0]["n"]
    sql = "SELECT COUNT(*) AS n FROM messages WHERE session_id = ?"
    return raw_rows(target, sql, (session_id,))[0]["n"]


def fts_rowids(target: Target, word: str) -> set[int]:
    """Ids the word index itself returns for ``word`` (bypassing the facade)."""
    if isinstance(target, SessionDB) and target.db_path is None:
        sql = (
            "SELECT id FROM messages WHERE to_tsvector('simple', COALESCE(content, '')) "
            "@@ to_tsquery('simple', ?)"
        )
    else:
        sql = "SELECT rowid AS id FROM messages_fts WHERE messages_fts MATCH ?"
    return {row["id"] for row in raw_rows(target, sql, (word,))}


def counters(db: SessionDB, session_id: str) -> tuple[int, int]:
    session = db.get_session(session_id)
    assert session is not None
    return session["message_count"], session["tool_call_count"]


# ----------------------------------------------------------------------
# construction, close, default location
# ----------------------------------------------------------------------
def test_no_argument_uses_hermes_home_state_db(_isolated_home: Path) -> None:
    expected = _isolated_home / "state.db"
    assert not expected.exists()
    db = SessionDB()
    try:
        assert Path(db.db_path) == expected
        db.create_session("home-1", "cli", model="m")
    finally:
        db.close()
    assert expected.is_file()
    assert raw_session(expected, "home-1")["model"] == "m"


def test_db_path_is_the_file_written(db_path: Path) -> None:
    db = SessionDB(db_path)
    try:
        assert Path(db.db_path) == db_path
        db.create_session("p1", "cli")
    finally:
        db.close()
    assert raw_session(db_path, "p1") is not None


def test_close_releases_every_connection_and_data_persists(db_path: Path) -> None:
    db = SessionDB(db_path)
    db.create_session("c1", "cli")
    db.append_message("c1", "user", "kept after close")
    db.close()
    db.close()  # idempotent
    assert db.store.engine.pool.checkedout() == 0
    # Leaving WAL mode needs the only connection to the file: nobody else holds one.
    with closing(sqlite3.connect(db_path)) as connection:
        (mode,) = connection.execute("PRAGMA journal_mode = DELETE").fetchone()
        assert mode == "delete"
        connection.execute("PRAGMA journal_mode = WAL").fetchone()
    reopened = SessionDB(db_path)
    try:
        assert [m["content"] for m in reopened.get_messages("c1")] == ["kept after close"]
    finally:
        reopened.close()


def test_context_manager_closes(db_path: Path) -> None:
    with SessionDB(db_path) as db:
        db.create_session("cm", "cli")
        assert db.session_count() == 1
    assert db.store.engine.pool.checkedout() == 0
    assert raw_session(db_path, "cm") is not None


def test_injected_store_is_not_closed_by_the_facade(db_path: Path) -> None:
    store = Store(db_path)
    try:
        db = SessionDB(store=store)
        db.create_session("inj", "cli")
        db.close()
        with store.read() as uow:  # the store still works: the facade did not own it
            assert uow.sessions.get("inj").source == "cli"  # type: ignore[union-attr]
        assert SessionDB(store=store).get_session("inj") is not None
    finally:
        store.close()


def test_db_path_and_store_together_are_refused(db_path: Path, tmp_path: Path) -> None:
    store = Store(db_path)
    try:
        with pytest.raises(InvalidInputError):
            SessionDB(tmp_path / "other.db", store=store)
    finally:
        store.close()
    assert not (tmp_path / "other.db").exists()


# ----------------------------------------------------------------------
# create_session
# ----------------------------------------------------------------------
def test_create_session_stores_every_field(db: SessionDB, clock: Any) -> None:
    config = {"temperature": 0.2, "max_tokens": 4096, "tools": ["terminal", "web"], "n": None}
    before = clock.now
    returned = db.create_session(
        session_id="sess_abc123",
        source="telegram",
        model="anthropic/claude-sonnet-4.6",
        model_config=config,
        system_prompt="You are Hermes.",
        user_id="user_1",
    )
    assert returned == "sess_abc123"
    session = db.get_session("sess_abc123")
    assert session["id"] == "sess_abc123"
    assert session["source"] == "telegram"
    assert session["model"] == "anthropic/claude-sonnet-4.6"
    assert json.loads(session["model_config"]) == config
    assert session["system_prompt"] == "You are Hermes."
    assert session["user_id"] == "user_1"
    assert session["parent_session_id"] is None
    assert before < session["started_at"] <= clock.now
    assert session["ended_at"] is None and session["end_reason"] is None
    for counter in (
        "message_count",
        "tool_call_count",
        "input_tokens",
        "output_tokens",
        "cache_read_tokens",
        "cache_write_tokens",
        "reasoning_tokens",
    ):
        assert session[counter] == 0, counter
    assert session["estimated_cost_usd"] is None and session["actual_cost_usd"] is None
    assert session["title"] is None
    # model_config is stored as JSON text, as documented
    raw = raw_session(db, "sess_abc123")
    assert isinstance(raw["model_config"], str)
    assert json.loads(raw["model_config"]) == config


def test_create_session_minimal_leaves_optional_fields_null(db: SessionDB) -> None:
    db.create_session("minimal", "cli")
    session = db.get_session("minimal")
    for field in ("model", "model_config", "system_prompt", "user_id", "parent_session_id"):
        assert session[field] is None, field


def test_create_session_with_parent_records_lineage(db: SessionDB) -> None:
    db.create_session("parent", "cli")
    db.create_session("child", "cli", parent_session_id="parent")
    assert db.get_session("child")["parent_session_id"] == "parent"
    assert db.get_session("parent")["parent_session_id"] is None


def test_parent_pointing_nowhere_is_invalid_input(db: SessionDB) -> None:
    with pytest.raises(InvalidInputError) as caught:
        db.create_session("orphan", "cli", parent_session_id="no-such-parent")
    assert not isinstance(caught.value, SessionExistsError)
    assert db.get_session("orphan") is None
    assert db.session_count() == 0


def test_get_session_unknown_is_none(db: SessionDB) -> None:
    db.create_session("known", "cli")
    assert db.get_session("unknown") is None
    assert db.get_session("KNOWN") is None


# ----------------------------------------------------------------------
# end / reopen / system prompt
# ----------------------------------------------------------------------
def test_end_session_then_reopen(db: SessionDB, clock: Any) -> None:
    db.create_session("life", "cli")
    started = db.get_session("life")["started_at"]
    clock.advance(60)
    db.end_session("life", end_reason="user_exit")
    ended = db.get_session("life")
    assert ended["end_reason"] == "user_exit"
    assert ended["ended_at"] >= started + 60
    db.reopen_session("life")
    reopened = db.get_session("life")
    assert reopened["ended_at"] is None and reopened["end_reason"] is None
    assert reopened["started_at"] == started


def test_end_session_without_reason(db: SessionDB) -> None:
    db.create_session("noreason", "cli")
    db.end_session("noreason", None)
    session = db.get_session("noreason")
    assert session["ended_at"] is not None and session["end_reason"] is None


def test_end_and_reopen_unknown_session_raise(db: SessionDB) -> None:
    with pytest.raises(SessionNotFoundError):
        db.end_session("ghost", "user_exit")
    with pytest.raises(SessionNotFoundError):
        db.reopen_session("ghost")
    assert db.session_count() == 0


def test_update_system_prompt(db: SessionDB) -> None:
    db.create_session("sp", "cli", system_prompt="old")
    db.update_system_prompt("sp", "new prompt\nwith lines")
    assert db.get_session("sp")["system_prompt"] == "new prompt\nwith lines"
    db.update_system_prompt("sp", None)
    assert db.get_session("sp")["system_prompt"] is None
    with pytest.raises(SessionNotFoundError):
        db.update_system_prompt("ghost", "x")


# ----------------------------------------------------------------------
# update_token_counts
# ----------------------------------------------------------------------
def test_update_token_counts_increments_every_counter(db: SessionDB) -> None:
    db.create_session("tok", "cli")
    db.update_token_counts(
        "tok",
        input_tokens=100,
        output_tokens=20,
        cache_read_tokens=5,
        cache_write_tokens=7,
        reasoning_tokens=11,
    )
    db.update_token_counts(
        "tok",
        input_tokens=1,
        output_tokens=2,
        cache_read_tokens=3,
        cache_write_tokens=4,
        reasoning_tokens=5,
    )
    session = db.get_session("tok")
    assert session["input_tokens"] == 101
    assert session["output_tokens"] == 22
    assert session["cache_read_tokens"] == 8
    assert session["cache_write_tokens"] == 11
    assert session["reasoning_tokens"] == 16


def test_update_token_counts_adds_costs_when_given_and_keeps_them_when_none(
    db: SessionDB,
) -> None:
    db.create_session("cost", "cli")
    db.update_token_counts("cost", input_tokens=1, estimated_cost_usd=0.5)
    session = db.get_session("cost")
    assert session["estimated_cost_usd"] == pytest.approx(0.5)
    assert session["actual_cost_usd"] is None  # unknown stays unknown
    db.update_token_counts("cost", estimated_cost_usd=0.25, actual_cost_usd=0.1)
    session = db.get_session("cost")
    assert session["estimated_cost_usd"] == pytest.approx(0.75)
    assert session["actual_cost_usd"] == pytest.approx(0.1)
    db.update_token_counts("cost", input_tokens=5)  # costs None: kept
    session = db.get_session("cost")
    assert session["estimated_cost_usd"] == pytest.approx(0.75)
    assert session["actual_cost_usd"] == pytest.approx(0.1)
    assert session["input_tokens"] == 6


def test_update_token_counts_replaces_cost_labels_and_keeps_the_first_route(
    db: SessionDB,
) -> None:
    db.create_session("labels", "cli")
    first = {
        "cost_status": "estimated",
        "cost_source": "pricing_table",
        "pricing_version": "2026-01",
        "billing_provider": "openrouter",
        "billing_base_url": "https://openrouter.ai/api/v1",
        "billing_mode": "metered",
    }
    db.update_token_counts("labels", **first)
    session = db.get_session("labels")
    assert {k: session[k] for k in first} == first
    second = {
        "cost_status": "final",
        "cost_source": "provider",
        "pricing_version": "2026-04",
        "billing_provider": "anthropic",
        "billing_base_url": "https://api.anthropic.com",
        "billing_mode": "subscription",
    }
    db.update_token_counts("labels", **second)
    session = db.get_session("labels")
    expected = {
        **first,
        **{k: second[k] for k in ("cost_status", "cost_source", "pricing_version")},
    }
    assert {k: session[k] for k in second} == expected  # the route stays the first one
    db.update_token_counts("labels", input_tokens=1)  # labels None: kept
    session = db.get_session("labels")
    assert {k: session[k] for k in second} == expected


def test_update_token_counts_fills_model_only_when_null(db: SessionDB) -> None:
    db.create_session("nomodel", "cli")
    db.update_token_counts("nomodel", input_tokens=1, model="first/model")
    assert db.get_session("nomodel")["model"] == "first/model"
    db.update_token_counts("nomodel", input_tokens=1, model="second/model")
    assert db.get_session("nomodel")["model"] == "first/model"
    db.create_session("hasmodel", "cli", model="created/model")
    db.update_token_counts("hasmodel", model="other/model")
    assert db.get_session("hasmodel")["model"] == "created/model"


def test_update_token_counts_absolute_sets_values(db: SessionDB) -> None:
    db.create_session("abs", "cli")
    db.update_token_counts(
        "abs",
        input_tokens=500,
        output_tokens=50,
        cache_read_tokens=9,
        cache_write_tokens=9,
        reasoning_tokens=9,
        estimated_cost_usd=1.0,
        actual_cost_usd=2.0,
    )
    db.update_token_counts(
        "abs",
        input_tokens=1200,
        output_tokens=300,
        cache_read_tokens=40,
        cache_write_tokens=30,
        reasoning_tokens=20,
        estimated_cost_usd=0.3,
        absolute=True,
    )
    session = db.get_session("abs")
    assert session["input_tokens"] == 1200
    assert session["output_tokens"] == 300
    assert session["cache_read_tokens"] == 40
    assert session["cache_write_tokens"] == 30
    assert session["reasoning_tokens"] == 20
    assert session["estimated_cost_usd"] == pytest.approx(0.3)  # set, not added
    assert session["actual_cost_usd"] == pytest.approx(2.0)  # None: kept
    # absolute with zeros really sets zero
    db.update_token_counts("abs", absolute=True)
    session = db.get_session("abs")
    assert session["input_tokens"] == 0 and session["output_tokens"] == 0


def test_update_token_counts_absolute_fills_a_missing_model(db: SessionDB) -> None:
    db.create_session("absmodel", "cli")
    db.update_token_counts("absmodel", input_tokens=3, model="filled/model", absolute=True)
    assert db.get_session("absmodel")["model"] == "filled/model"


def test_regression_absolute_token_update_overwrites_existing_model(db: SessionDB) -> None:
    """Regression (was a package bug): with absolute=True, a given model replaces the stored one.

    The docstring ("``model`` fills in a session that had none") and the old
    code (``model = COALESCE(model, ?)`` in both modes) keep an existing model.
    Fix: hermes_store/repositories/sessions.py, ``_SET_USAGE``:
    ``model=func.coalesce(S.c.model, _p("model", Text))`` (as in ``_ADD_USAGE``).
    """
    db.create_session("keepmodel", "cli", model="created/model")
    db.update_token_counts("keepmodel", input_tokens=10, model="other/model", absolute=True)
    assert db.get_session("keepmodel")["input_tokens"] == 10
    assert db.get_session("keepmodel")["model"] == "created/model"


def test_update_token_counts_unknown_session(db: SessionDB) -> None:
    with pytest.raises(SessionNotFoundError):
        db.update_token_counts("ghost", input_tokens=1)
    with pytest.raises(SessionNotFoundError):
        db.update_token_counts("ghost", input_tokens=1, absolute=True)


# ----------------------------------------------------------------------
# append_message / get_messages
# ----------------------------------------------------------------------
def test_append_message_returns_id_and_bumps_counters(db: SessionDB) -> None:
    db.create_session("am", "cli")
    first = db.append_message("am", "user", "hello")
    second = db.append_message("am", "assistant", "hi")
    assert isinstance(first, int) and isinstance(second, int)
    assert second > first
    assert counters(db, "am") == (2, 0)
    ids = [row["id"] for row in raw_rows(db, "SELECT id FROM messages ORDER BY id")]
    assert ids == [first, second]


def test_tool_call_count_counts_the_calls_in_a_list(db: SessionDB) -> None:
    db.create_session("tc", "cli")
    calls = [
        {"id": f"call_{i}", "type": "function", "function": {"name": "t", "arguments": "{}"}}
        for i in range(3)
    ]
    db.append_message("tc", "assistant", None, tool_calls=calls)
    assert counters(db, "tc") == (1, 3)
    db.append_message("tc", "assistant", None, tool_calls=calls[:1])
    assert counters(db, "tc") == (2, 4)
    db.append_message("tc", "assistant", "no tools")
    db.append_message("tc", "assistant", "empty list", tool_calls=[])
    assert counters(db, "tc") == (4, 4)
    db.append_message("tc", "tool", "result", tool_call_id="call_0", tool_name="t")
    assert counters(db, "tc") == (5, 4)


def test_regression_tuple_of_tool_calls_counts_one(db: SessionDB) -> None:
    """Regression (was a package bug): a tuple of N tool calls was counted as 1.

    ``check()`` then reports a freshly written database as miscounted (it counts
    JSON array items). Fix: hermes_store/facade.py, ``_tool_call_total``: count
    the items of any non-string Sequence (``isinstance(tool_calls, list | tuple)``),
    i.e. the same thing the stored JSON array holds.
    """
    db.create_session("tuple", "cli")
    calls = ({"id": "a"}, {"id": "b"})
    db.append_message("tuple", "assistant", None, tool_calls=calls)
    assert db.get_messages("tuple")[0]["tool_calls"] == [{"id": "a"}, {"id": "b"}]
    assert check(db.store).miscounted == []
    assert counters(db, "tuple") == (1, 2)


def test_append_message_stores_every_field_and_decodes_json(db: SessionDB, clock: Any) -> None:
    db.create_session("fields", "cli")
    tool_calls = [{"id": "call_1", "function": {"name": "terminal", "arguments": '{"cmd": "ls"}'}}]
    reasoning_details = [{"type": "reasoning.text", "text": "step 1", "signature": "abc"}]
    codex_items = [{"id": "rs_1", "type": "reasoning", "encrypted_content": "xyz"}]
    before = clock.now
    message_id = db.append_message(
        session_id="fields",
        role="assistant",
        content="Here's the answer...",
        tool_name="terminal",
        tool_calls=tool_calls,
        tool_call_id="call_0",
        token_count=150,
        finish_reason="tool_calls",
        reasoning="Let me think about this...",
        reasoning_details=reasoning_details,
        codex_reasoning_items=codex_items,
    )
    (message,) = db.get_messages("fields")
    assert message["id"] == message_id
    assert message["session_id"] == "fields"
    assert message["role"] == "assistant"
    assert message["content"] == "Here's the answer..."
    assert message["tool_name"] == "terminal"
    assert message["tool_call_id"] == "call_0"
    assert message["token_count"] == 150
    assert message["finish_reason"] == "tool_calls"
    assert message["reasoning"] == "Let me think about this..."
    assert message["tool_calls"] == tool_calls
    assert message["reasoning_details"] == reasoning_details
    assert message["codex_reasoning_items"] == codex_items
    assert before < message["timestamp"] <= clock.now
    # on disk the JSON fields are JSON text
    (raw,) = raw_rows(db, "SELECT * FROM messages WHERE id = ?", (message_id,))
    for field, value in (
        ("tool_calls", tool_calls),
        ("reasoning_details", reasoning_details),
        ("codex_reasoning_items", codex_items),
    ):
        assert isinstance(raw[field], str)
        assert json.loads(raw[field]) == value


def test_append_message_minimal_leaves_optional_fields_null(db: SessionDB) -> None:
    db.create_session("min", "cli")
    db.append_message("min", "user")
    (message,) = db.get_messages("min")
    for field in (
        "content",
        "tool_name",
        "tool_calls",
        "tool_call_id",
        "token_count",
        "finish_reason",
        "reasoning",
        "reasoning_details",
        "codex_reasoning_items",
    ):
        assert message[field] is None, field


def test_append_message_unknown_session_writes_nothing(db: SessionDB) -> None:
    db.create_session("real", "cli")
    with pytest.raises(SessionNotFoundError):
        db.append_message("ghost", "user", "lost")
    assert raw_message_count(db) == 0
    assert counters(db, "real") == (0, 0)


def test_get_messages_in_order_and_only_of_that_session(db: SessionDB) -> None:
    db.create_session("a", "cli")
    db.create_session("b", "cli")
    for i in range(5):
        db.append_message("a", "user", f"a{i}")
        db.append_message("b", "user", f"b{i}")
    assert [m["content"] for m in db.get_messages("a")] == [f"a{i}" for i in range(5)]
    assert [m["content"] for m in db.get_messages("b")] == [f"b{i}" for i in range(5)]
    ids = [m["id"] for m in db.get_messages("a")]
    assert ids == sorted(ids)
    assert db.get_messages("nobody") == []


# ----------------------------------------------------------------------
# append_messages: a turn in one transaction
# ----------------------------------------------------------------------
def test_append_messages_writes_a_turn(db: SessionDB) -> None:
    db.create_session("turn", "cli")
    db.append_message("turn", "system", "boot")
    calls = [{"id": "c1", "function": {"name": "web", "arguments": "{}"}}] * 2
    ids = db.append_messages(
        "turn",
        [
            {"role": "user", "content": "search the web"},
            {"role": "assistant", "content": None, "tool_calls": calls, "reasoning": "plan"},
            {"role": "tool", "content": "result", "tool_call_id": "c1", "tool_name": "web"},
            {"role": "assistant", "content": "done", "finish_reason": "stop"},
        ],
    )
    assert len(ids) == 4 and ids == sorted(ids) and len(set(ids)) == 4
    messages = db.get_messages("turn")
    assert [m["id"] for m in messages[1:]] == ids
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert messages[2]["tool_calls"] == calls
    assert messages[3]["tool_call_id"] == "c1"
    assert messages[4]["finish_reason"] == "stop"
    assert counters(db, "turn") == (5, 2)


def test_append_messages_longer_than_one_insert_keeps_ids_order_and_index(db: SessionDB) -> None:
    # SQLite writes a batch as multi-row INSERTs of BATCH_ROWS rows and derives
    # the ids from each statement's last row: they must name the stored rows.
    db.create_session("other", "cli")
    db.create_session("long", "cli")
    doomed = db.append_message("other", "user", "gap maker")
    db.delete_session("other")  # AUTOINCREMENT never reuses the freed id
    total = 2 * BATCH_ROWS + 37
    ids = db.append_messages(
        "long", [{"role": "user", "content": f"line {i} marker{i}x"} for i in range(total)]
    )
    stored = db.get_messages("long")
    assert [m["id"] for m in stored] == ids and doomed not in ids
    assert len(set(ids)) == total and ids == sorted(ids)
    assert [m["content"] for m in stored] == [f"line {i} marker{i}x" for i in range(total)]
    for i in (0, BATCH_ROWS - 1, BATCH_ROWS, total - 1):
        assert fts_rowids(db, f"marker{i}x") == {ids[i]}
    assert counters(db, "long") == (total, 0)


def test_append_messages_empty_batch_writes_nothing(db: SessionDB) -> None:
    db.create_session("empty", "cli")
    assert db.append_messages("empty", []) == []
    assert counters(db, "empty") == (0, 0)
    assert raw_message_count(db) == 0


def test_a_turn_with_lone_surrogates_is_stored_whole(db: SessionDB) -> None:
    """Scraped text carries lone surrogates: the turn is kept, each one as U+FFFD."""
    db.create_session("scraped", "cli")
    ids = db.append_messages(
        "scraped",
        [
            {"role": "user", "content": "look this up"},
            {"role": "assistant", "tool_calls": [{"id": "c1", "args": {"q": "\udc80"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "page \ud83d text"},
            {"role": "assistant", "content": "done", "reasoning": "read \udfff"},
        ],
    )
    assert len(ids) == 4
    stored = db.get_messages("scraped")
    assert stored[1]["tool_calls"] == [{"id": "c1", "args": {"q": "\ufffd"}}]
    assert stored[2]["content"] == "page \ufffd text"
    assert stored[3]["reasoning"] == "read \ufffd"
    assert counters(db, "scraped") == (4, 1)
    assert fts_rowids(db, "page") == {ids[2]}


@pytest.mark.parametrize(
    "bad",
    [
        {"role": "user", "content": 123},
        {"role": "assistant", "tool_calls": [object()]},
        {"role": "user", "content": "x", "unknown_field": 1},
        {"content": "no role"},
        {"role": ""},
        {"role": "user", "token_count": "12"},
        "not a dict",
    ],
    ids=[
        "content-int",
        "tool_calls-unserializable",
        "unknown-field",
        "no-role",
        "empty-role",
        "token_count-str",
        "not-a-dict",
    ],
)
def test_append_messages_one_bad_message_writes_nothing(db: SessionDB, bad: Any) -> None:
    db.create_session("atomic", "cli")
    db.append_message("atomic", "user", "before")
    batch = [
        {"role": "user", "content": "good one"},
        {"role": "assistant", "content": "good two", "tool_calls": [{"id": "x"}]},
        bad,
        {"role": "user", "content": "good three"},
    ]
    with pytest.raises(InvalidInputError):
        db.append_messages("atomic", batch)
    assert [m["content"] for m in db.get_messages("atomic")] == ["before"]
    assert counters(db, "atomic") == (1, 0)
    assert raw_message_count(db) == 1
    assert fts_rowids(db, "good") == set()


def test_append_messages_failure_inside_the_transaction_rolls_back_everything(
    db: SessionDB, db_path: Path
) -> None:
    """A statement failing mid-batch (here: a trigger refusing one row) undoes the turn."""
    db.create_session("mid", "cli")
    db.append_message("mid", "user", "before")
    with closing(sqlite3.connect(db_path)) as connection:
        connection.execute(
            "CREATE TRIGGER refuse_poison BEFORE INSERT ON messages "
            "WHEN new.content = 'poison' BEGIN SELECT RAISE(ABORT, 'poison refused'); END"
        )
        connection.commit()
    batch = [
        {"role": "user", "content": "first healthy"},
        {"role": "assistant", "content": "second healthy"},
        {"role": "user", "content": "poison"},
        {"role": "assistant", "content": "never written"},
    ]
    with pytest.raises(DBAPIError):
        db.append_messages("mid", batch)
    assert [m["content"] for m in db.get_messages("mid")] == ["before"]
    assert counters(db, "mid") == (1, 0)
    assert fts_rowids(db_path, "healthy") == set()
    # the session is still writable afterwards
    db.append_messages("mid", [{"role": "user", "content": "healthy again"}])
    assert counters(db, "mid") == (2, 0)


def test_append_messages_unknown_session_writes_nothing(db: SessionDB) -> None:
    with pytest.raises(SessionNotFoundError):
        db.append_messages("ghost", [{"role": "user", "content": "x"}])
    assert raw_message_count(db) == 0


# ----------------------------------------------------------------------
# get_messages_as_conversation
# ----------------------------------------------------------------------
def test_conversation_is_openai_format_with_reasoning_only_on_assistant(db: SessionDB) -> None:
    db.create_session("conv", "cli")
    calls = [{"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]
    details = [{"type": "reasoning.text", "text": "think"}]
    codex = [{"id": "rs_1", "type": "reasoning"}]
    db.append_message("conv", "system", "You are Hermes.")
    db.append_message(
        "conv",
        "user",
        "list files",
        reasoning="user reasoning must not be replayed",
        reasoning_details=details,
        codex_reasoning_items=codex,
    )
    db.append_message(
        "conv",
        "assistant",
        None,
        tool_calls=calls,
        reasoning="I should run ls",
        reasoning_details=details,
        codex_reasoning_items=codex,
        finish_reason="tool_calls",
        token_count=12,
    )
    db.append_message(
        "conv",
        "tool",
        "a.txt b.txt",
        tool_call_id="call_1",
        tool_name="ls",
        reasoning="tool reasoning must not be replayed",
    )
    db.append_message("conv", "assistant", "There are two files.")
    assert db.get_messages_as_conversation("conv") == [
        {"role": "system", "content": "You are Hermes."},
        {"role": "user", "content": "list files"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": calls,
            "reasoning": "I should run ls",
            "reasoning_details": details,
            "codex_reasoning_items": codex,
        },
        {"role": "tool", "content": "a.txt b.txt", "tool_call_id": "call_1", "tool_name": "ls"},
        {"role": "assistant", "content": "There are two files."},
    ]


def test_conversation_of_unknown_or_empty_session_is_empty(db: SessionDB) -> None:
    db.create_session("quiet", "cli")
    assert db.get_messages_as_conversation("quiet") == []
    assert db.get_messages_as_conversation("ghost") == []


# ----------------------------------------------------------------------
# clear_messages / delete_session
# ----------------------------------------------------------------------
def test_clear_messages_keeps_session_and_resets_counters(db: SessionDB) -> None:
    db.create_session("clr", "cli", model="m", system_prompt="sp")
    db.set_session_title("clr", "Clear Me")
    db.create_session("other", "cli")
    db.append_message("clr", "user", "zebracorn secret")
    db.append_message("clr", "assistant", "zebracorn reply", tool_calls=[{"id": 1}, {"id": 2}])
    db.append_message("other", "user", "zebracorn elsewhere")
    assert counters(db, "clr") == (2, 2)
    db.clear_messages("clr")
    session = db.get_session("clr")
    assert session is not None
    assert session["title"] == "Clear Me" and session["model"] == "m"
    assert counters(db, "clr") == (0, 0)
    assert db.get_messages("clr") == []
    assert raw_message_count(db, "clr") == 0
    hits = db.search_messages("zebracorn")
    assert [h["session_id"] for h in hits] == ["other"]
    assert len(fts_rowids(db, "zebracorn")) == 1
    # the other session is untouched, and the cleared one takes new messages
    assert counters(db, "other") == (1, 0)
    db.append_message("clr", "user", "fresh start")
    assert counters(db, "clr") == (1, 0)


def test_clear_messages_unknown_session(db: SessionDB) -> None:
    with pytest.raises(SessionNotFoundError):
        db.clear_messages("ghost")


def test_delete_session_removes_messages_and_orphans_children(db: SessionDB) -> None:
    db.create_session("root", "cli")
    db.create_session("kid1", "cli", parent_session_id="root")
    db.create_session("kid2", "cli", parent_session_id="root")
    db.create_session("grandkid", "cli", parent_session_id="kid1")
    db.append_message("root", "user", "quokkaword in root")
    db.append_message("kid1", "user", "quokkaword in kid")
    assert db.delete_session("root") is True
    assert db.get_session("root") is None
    assert raw_message_count(db, "root") == 0
    for kid in ("kid1", "kid2"):
        assert db.get_session(kid) is not None
        assert db.get_session(kid)["parent_session_id"] is None
    assert db.get_session("grandkid")["parent_session_id"] == "kid1"
    assert [m["content"] for m in db.get_messages("kid1")] == ["quokkaword in kid"]
    assert [h["session_id"] for h in db.search_messages("quokkaword")] == ["kid1"]
    assert len(fts_rowids(db, "quokkaword")) == 1
    assert db.delete_session("root") is False
    assert db.delete_session("never-existed") is False
    assert db.session_count() == 3


# ----------------------------------------------------------------------
# prune_sessions
# ----------------------------------------------------------------------
def _old_and_new_sessions(db: SessionDB, clock: Any) -> None:
    db.create_session("old_ended", "cli")
    db.create_session("old_ended_tg", "telegram")
    db.create_session("old_active", "cli")
    db.append_message("old_ended", "user", "wombatword old")
    db.append_message("old_ended_tg", "user", "wombatword telegram")
    db.end_session("old_ended", "user_exit")
    db.end_session("old_ended_tg", "user_exit")
    clock.advance(100 * DAY)
    db.create_session("child_of_old", "cli", parent_session_id="old_ended")
    db.create_session("new_ended", "cli")
    db.append_message("new_ended", "user", "wombatword new")
    db.end_session("new_ended", "done")


def test_prune_deletes_only_old_ended_sessions(db: SessionDB, clock: Any) -> None:
    _old_and_new_sessions(db, clock)
    assert db.prune_sessions(older_than_days=90) == 2
    remaining = {s["id"] for s in db.search_sessions(limit=100)}
    assert remaining == {"old_active", "child_of_old", "new_ended"}
    assert db.get_session("child_of_old")["parent_session_id"] is None
    assert raw_message_count(db, "old_ended") == 0
    assert raw_message_count(db, "old_ended_tg") == 0
    assert [h["session_id"] for h in db.search_messages("wombatword")] == ["new_ended"]
    assert db.prune_sessions(older_than_days=90) == 0


def test_prune_with_source_filter(db: SessionDB, clock: Any) -> None:
    _old_and_new_sessions(db, clock)
    assert db.prune_sessions(older_than_days=90, source="telegram") == 1
    assert db.get_session("old_ended_tg") is None
    assert db.get_session("old_ended") is not None
    assert db.get_session("child_of_old")["parent_session_id"] == "old_ended"
    assert db.prune_sessions(older_than_days=90, source="discord") == 0
    assert db.session_count() == 4


def test_prune_respects_the_age_threshold(db: SessionDB, clock: Any) -> None:
    db.create_session("ten_days", "cli")
    db.end_session("ten_days", "done")
    clock.advance(10 * DAY)
    assert db.prune_sessions(older_than_days=30) == 0
    assert db.prune_sessions() == 0  # default: 90 days
    assert db.get_session("ten_days") is not None
    assert db.prune_sessions(older_than_days=9.5) == 1
    assert db.get_session("ten_days") is None


def test_a_prunes_sizes_count_the_bytes_beyond_ascii(db: SessionDB) -> None:
    """What a batch of the prune costs (see uow/pruning.py) is read alike on every backend."""
    db.create_session("mixed", "cli")
    db.append_message("mixed", "user", "deploy 服务端")  # 10 characters, 3 of them 3 bytes
    db.append_message("mixed", "tool", None)
    with db.store.read() as uow:
        assert uow.sessions.text_sizes(["mixed", "none"]) == {"mixed": (2, 10, 6)}


# ----------------------------------------------------------------------
# export
# ----------------------------------------------------------------------
def test_export_session(db: SessionDB) -> None:
    db.create_session("exp", "cli", model="m", model_config={"k": 1})
    db.append_message("exp", "user", "q")
    db.append_message("exp", "assistant", "a", tool_calls=[{"id": "c"}])
    exported = db.export_session("exp")
    session = db.get_session("exp")
    assert {k: v for k, v in exported.items() if k != "messages"} == session
    assert [m["content"] for m in exported["messages"]] == ["q", "a"]
    assert exported["messages"][1]["tool_calls"] == [{"id": "c"}]
    assert exported["messages"] == db.get_messages("exp")
    assert db.export_session("ghost") is None


def test_export_all_and_iter_export(db: SessionDB) -> None:
    db.create_session("cli1", "cli")
    db.create_session("tg1", "telegram")
    db.create_session("cli2", "cli")
    db.append_message("cli1", "user", "one")
    db.append_message("tg1", "user", "two")
    everything = db.export_all()
    assert {e["id"] for e in everything} == {"cli1", "tg1", "cli2"}
    by_id = {e["id"]: e for e in everything}
    assert [m["content"] for m in by_id["cli1"]["messages"]] == ["one"]
    assert [m["content"] for m in by_id["tg1"]["messages"]] == ["two"]
    assert by_id["cli2"]["messages"] == []
    cli_only = db.export_all(source="cli")
    assert {e["id"] for e in cli_only} == {"cli1", "cli2"}
    assert all(e["source"] == "cli" for e in cli_only)
    assert db.export_all(source="discord") == []
    iterator = db.iter_export()
    assert isinstance(iterator, Iterator) and not isinstance(iterator, list)
    assert list(iterator) == everything
    assert list(db.iter_export("telegram")) == [by_id["tg1"]]


def test_an_export_abandoned_before_close_ends_without_an_error(db: SessionDB) -> None:
    """Before, its read unit ended after close() with "Cannot operate on a closed database"
    ("Exception ignored in: <generator ...>")."""
    for name in ("a", "b", "c"):
        db.create_session(name, "cli")
    unraisable: list[Any] = []
    previous, sys.unraisablehook = sys.unraisablehook, unraisable.append
    try:
        exported = db.iter_export()
        next(exported)
        db.close()
        del exported
        gc.collect()
    finally:
        sys.unraisablehook = previous
    assert [str(u.exc_value) for u in unraisable] == []
    assert db.session_count() == 3, "the store opens again on the next call"


# ----------------------------------------------------------------------
# listing
# ----------------------------------------------------------------------
def test_search_sessions_newest_first_with_source_and_paging(db: SessionDB) -> None:
    for i in range(5):
        db.create_session(f"s{i}", "cli" if i % 2 == 0 else "telegram")
    assert [s["id"] for s in db.search_sessions()] == ["s4", "s3", "s2", "s1", "s0"]
    assert [s["id"] for s in db.search_sessions(source="cli")] == ["s4", "s2", "s0"]
    assert [s["id"] for s in db.search_sessions(limit=2)] == ["s4", "s3"]
    assert [s["id"] for s in db.search_sessions(limit=2, offset=2)] == ["s2", "s1"]
    assert db.search_sessions(offset=10) == []
    assert db.search_sessions()[0] == db.get_session("s4")


def test_list_sessions_rich_preview_and_last_active(db: SessionDB, clock: Any) -> None:
    db.create_session("rich", "cli")
    db.append_message("rich", "system", "system text is not a preview")
    db.append_message("rich", "assistant", "assistant text is not a preview")
    db.append_message("rich", "user", None)  # no content: skipped
    first_user = "U" * 40 + "-the first user message, long enough to be cut at 63"
    db.append_message("rich", "user", first_user)
    db.append_message("rich", "user", "second user message")
    clock.advance(30)
    last_id = db.append_message("rich", "assistant", "last")
    db.create_session("silent", "telegram")
    rows = db.list_sessions_rich()
    assert [r["id"] for r in rows] == ["silent", "rich"]
    by_id = {r["id"]: r for r in rows}
    assert by_id["rich"]["preview"] == first_user[:60] + "..."  # the old class's cut
    last = next(m for m in db.get_messages("rich") if m["id"] == last_id)
    assert by_id["rich"]["last_active"] == last["timestamp"]
    assert by_id["silent"]["preview"] == ""
    assert by_id["silent"]["last_active"] == db.get_session("silent")["started_at"]
    assert by_id["rich"]["message_count"] == 6  # the session row comes along
    assert [r["id"] for r in db.list_sessions_rich(source="telegram")] == ["silent"]
    assert [r["id"] for r in db.list_sessions_rich(limit=1, offset=1)] == ["rich"]


def test_list_sessions_rich_short_preview_is_whole_message(db: SessionDB) -> None:
    db.create_session("short", "cli")
    db.append_message("short", "user", "hi")
    assert db.list_sessions_rich()[0]["preview"] == "hi"


def test_session_count_and_message_count(db: SessionDB) -> None:
    assert db.session_count() == 0 and db.message_count() == 0
    db.create_session("c1", "cli")
    db.create_session("c2", "cli")
    db.create_session("t1", "telegram")
    db.append_messages("c1", [{"role": "user", "content": str(i)} for i in range(3)])
    db.append_message("t1", "user", "x")
    assert db.session_count() == 3
    assert db.session_count("cli") == 2
    assert db.session_count("telegram") == 1
    assert db.session_count("discord") == 0
    assert db.message_count() == 4
    assert db.message_count("c1") == 3
    assert db.message_count("c2") == 0
    assert db.message_count("ghost") == 0


# ----------------------------------------------------------------------
# lineage
# ----------------------------------------------------------------------
def _three_levels(db: SessionDB) -> None:
    db.create_session("root", "cli")
    db.set_session_title("root", "Lineage")
    db.create_session("mid", "cli", parent_session_id="root")
    db.set_session_title("mid", "Lineage #2")
    db.create_session("leaf", "cli", parent_session_id="mid")
    db.set_session_title("leaf", "Lineage #3")
    db.create_session("sibling", "cli", parent_session_id="root")
    db.create_session("unrelated", "cli")


def test_get_ancestors(db: SessionDB) -> None:
    _three_levels(db)
    ancestors = db.get_ancestors("leaf")
    assert [a["id"] for a in ancestors] == ["leaf", "mid", "root"]
    assert [a["parent_session_id"] for a in ancestors] == ["mid", "root", None]
    assert [a["title"] for a in ancestors] == ["Lineage #3", "Lineage #2", "Lineage"]
    assert ancestors[2]["started_at"] == db.get_session("root")["started_at"]
    assert [a["id"] for a in db.get_ancestors("root")] == ["root"]
    assert db.get_ancestors("ghost") == []


def test_get_descendants(db: SessionDB) -> None:
    _three_levels(db)
    descendants = db.get_descendants("root")
    assert descendants[0]["id"] == "root"
    assert sorted(d["id"] for d in descendants) == ["leaf", "mid", "root", "sibling"]
    assert len(descendants) == 4
    assert {d["id"]: d["title"] for d in descendants}["leaf"] == "Lineage #3"
    assert sorted(d["id"] for d in db.get_descendants("mid")) == ["leaf", "mid"]
    assert [d["id"] for d in db.get_descendants("leaf")] == ["leaf"]
    assert db.get_descendants("ghost") == []


# ----------------------------------------------------------------------
# usage reports
# ----------------------------------------------------------------------
def test_token_usage_by_model(db: SessionDB) -> None:
    db.create_session("a1", "cli", model="model-a")
    db.create_session("a2", "cli", model="model-a")
    db.create_session("b1", "cli", model="model-b")
    db.create_session("none", "cli")
    db.update_token_counts("a1", input_tokens=100, output_tokens=10, estimated_cost_usd=0.1)
    db.update_token_counts("a2", input_tokens=200, output_tokens=20, estimated_cost_usd=0.2)
    db.update_token_counts("b1", input_tokens=5, output_tokens=5, estimated_cost_usd=1.5)
    db.update_token_counts("none", input_tokens=999, estimated_cost_usd=9.0)
    usage = db.token_usage_by_model()
    assert [u["model"] for u in usage] == ["model-b", "model-a"]  # by total cost, descending
    by_model = {u["model"]: u for u in usage}
    assert by_model["model-a"]["session_count"] == 2
    assert by_model["model-a"]["total_input"] == 300
    assert by_model["model-a"]["total_output"] == 30
    assert by_model["model-a"]["total_cost"] == pytest.approx(0.3)
    assert by_model["model-b"]["session_count"] == 1
    assert by_model["model-b"]["total_cost"] == pytest.approx(1.5)


def test_models_without_a_known_cost_come_last_on_every_backend(db: SessionDB) -> None:
    # SQLite sorts NULL last in DESC order, PostgreSQL first; NULLS LAST keeps SQLite's.
    db.create_session("free", "cli", model="model-free")
    db.create_session("paid", "cli", model="model-paid")
    db.update_token_counts("free", input_tokens=7)
    db.update_token_counts("paid", input_tokens=1, estimated_cost_usd=0.5)
    assert [u["model"] for u in db.token_usage_by_model()] == ["model-paid", "model-free"]


def test_top_sessions_by_tokens(db: SessionDB) -> None:
    for name, tokens in (("small", 10), ("big", 1000), ("medium", 100), ("tiny", 1)):
        db.create_session(name, "cli", model=f"m-{name}")
        db.update_token_counts(
            name, input_tokens=tokens, output_tokens=tokens // 2, estimated_cost_usd=0.01
        )
    db.set_session_title("big", "Big One")
    top = db.top_sessions_by_tokens()
    assert [t["id"] for t in top] == ["big", "medium", "small", "tiny"]
    assert top[0]["total_tokens"] == 1500
    assert top[0]["title"] == "Big One"
    assert top[0]["model"] == "m-big"
    assert top[0]["estimated_cost_usd"] == pytest.approx(0.01)
    assert [t["id"] for t in db.top_sessions_by_tokens(2)] == ["big", "medium"]
    assert db.top_sessions_by_tokens(0) == []


# ----------------------------------------------------------------------
# a stored text that is not UTF-8 (bit rot, another program): read with U+FFFD
# ----------------------------------------------------------------------
BAD_TEXT = "636166ff2074696d65"  # b"caf\xff time": one byte that is not UTF-8
READ_AS = "caf\ufffd time"
BAD_TITLE = "7469746c65ff"  # b"title\xff"
TITLE_READ_AS = "title\ufffd"


def plant_bad_text(path: Path) -> int:
    """A store whose one assistant message (and one title) holds a byte that is not UTF-8."""
    with SessionDB(path) as db:
        db.create_session("bad", "cli")
        db.create_session("fine", "cli")
        db.set_session_title("fine", "ok title")
        db.append_message("bad", "user", "hello world")
        db.append_message("fine", "user", "hello there")
        (message_id,) = db.append_messages("bad", [{"role": "assistant", "content": "cafe time"}])
    with closing(sqlite3.connect(path)) as raw, raw:
        raw.execute(
            f"UPDATE messages SET content = CAST(x'{BAD_TEXT}' AS TEXT) WHERE id = ?", (message_id,)
        )
        raw.execute(f"UPDATE sessions SET title = CAST(x'{BAD_TITLE}' AS TEXT) WHERE id = 'bad'")
    return message_id


def test_a_text_that_is_not_utf8_reads_with_replacement_and_a_log_line(
    db_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    message_id = plant_bad_text(db_path)
    db = SessionDB(db_path)
    with caplog.at_level("WARNING", logger="hermes_store"):
        assert db.get_messages("bad")[-1]["content"] == READ_AS
        assert db.get_messages_as_conversation("bad")[-1]["content"] == READ_AS
        exported = db.export_session("bad")
        assert exported is not None and exported["messages"][-1]["content"] == READ_AS
        assert exported["title"] == TITLE_READ_AS
        found = db.search_messages("time")
        assert [(r["id"], r["context"][-1]["content"]) for r in found] == [(message_id, READ_AS)]
        listing = {s["id"]: s for s in db.list_sessions_rich()}
        assert set(listing) == {"bad", "fine"} and listing["bad"]["title"] == TITLE_READ_AS
    db.close()
    said = [r.getMessage() for r in caplog.records if "not UTF-8" in r.getMessage()]
    assert said and all(str(db_path) in line and "check --repair" in line for line in said)
    assert any(f"messages id {message_id} column content" in line for line in said)
    assert any("sessions id 'bad' column title" in line for line in said)


def test_the_command_line_shows_and_exports_a_text_that_is_not_utf8(db_path: Path) -> None:
    plant_bad_text(db_path)
    for command in (["show", "bad"], ["export"], ["sessions"]):
        done = subprocess.run(
            [sys.executable, "-m", "hermes_store.cli", *command, "--db", str(db_path)],
            capture_output=True,
            text=True,
            env={**os.environ, "NO_COLOR": "1", "COLUMNS": "200"},
            timeout=120,
        )
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
        assert (TITLE_READ_AS if command == ["sessions"] else READ_AS) in done.stdout
