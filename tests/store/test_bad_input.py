"""Hostile input through every public method of ``SessionDB``.

Every rejected call is checked against a snapshot of the whole file taken
with plain ``sqlite3`` (schema, every row of sessions and messages, counters,
FTS index, autoincrement sequence): a refused call must leave it exactly as
it was. Tests named ``test_regression_*`` pin defects found and fixed in the package.
"""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from hermes_store import (
    ContentionPolicy,
    InvalidInputError,
    SessionDB,
    SessionNotFoundError,
    TitleConflictError,
)
from hermes_store.backends.sqlite.library import driver as sqlite3
from hermes_store.domain.messages import MessageIn

Call = Callable[[SessionDB], Any]


# ----------------------------------------------------------------------
# snapshot of the whole database: plain sqlite3 on SQLite, plain SQL on PostgreSQL
# ----------------------------------------------------------------------
def snapshot(db: SessionDB) -> dict[str, Any]:
    if db.db_path is None:
        return _pg_snapshot(db)
    with closing(sqlite3.connect(db.db_path)) as connection:
        tables = {
            name
            for (name,) in connection.execute("SELECT name FROM sqlite_master WHERE type='table'")
        }
        state: dict[str, Any] = {
            "schema": connection.execute(
                "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name"
            ).fetchall(),
            "sessions": connection.execute("SELECT * FROM sessions ORDER BY id").fetchall(),
            "messages": connection.execute("SELECT * FROM messages ORDER BY id").fetchall(),
            "counters": connection.execute(COUNTERS).fetchall(),
            "real_counts": connection.execute(REAL_COUNTS).fetchall(),
            "fts_seedword": connection.execute(
                "SELECT rowid FROM messages_fts WHERE messages_fts MATCH 'seedword' ORDER BY 1"
            ).fetchall(),
        }
        if "messages_fts_docsize" in tables:  # the FTS index's own row list
            state["fts_docsize"] = connection.execute(
                "SELECT * FROM messages_fts_docsize ORDER BY id"
            ).fetchall()
        if "sqlite_sequence" in tables:
            state["sequence"] = connection.execute(
                "SELECT * FROM sqlite_sequence ORDER BY name"
            ).fetchall()
    return state


COUNTERS = (
    "SELECT id, message_count, tool_call_count, input_tokens, output_tokens, "
    "cache_read_tokens, cache_write_tokens, reasoning_tokens, "
    "estimated_cost_usd, actual_cost_usd FROM sessions ORDER BY id"
)
REAL_COUNTS = "SELECT session_id, COUNT(*) FROM messages GROUP BY session_id ORDER BY 1"


def _pg_snapshot(db: SessionDB) -> dict[str, Any]:
    """The same picture of a PostgreSQL store, through a connection of its own."""
    with db.store.engine.connect() as connection:

        def rows(sql: str) -> list[tuple[Any, ...]]:
            return [tuple(row) for row in connection.exec_driver_sql(sql)]

        return {
            "schema": rows(
                "SELECT 'table', table_name, table_name, '' FROM information_schema.tables "
                "WHERE table_schema = current_schema() UNION ALL "
                "SELECT 'index', indexname, tablename, indexdef FROM pg_indexes "
                "WHERE schemaname = current_schema() ORDER BY 1, 2"
            ),
            "sessions": rows("SELECT * FROM sessions ORDER BY id"),
            "messages": rows("SELECT * FROM messages ORDER BY id"),
            "counters": rows(COUNTERS),
            "real_counts": rows(REAL_COUNTS),
            "fts_seedword": rows(
                "SELECT id FROM messages "
                "WHERE to_tsvector('simple', LEFT(COALESCE(content, ''), 100000)) "
                "@@ to_tsquery('simple', 'seedword') ORDER BY 1"
            ),
            "sequence": rows("SELECT last_value, is_called FROM messages_id_seq"),
        }


def assert_rejected(
    db: SessionDB, call: Call, error: type[BaseException] = InvalidInputError
) -> BaseException:
    before = snapshot(db)
    with pytest.raises(error) as caught:
        call(db)
    assert snapshot(db) == before, "a rejected call changed the database"
    return caught.value


@pytest.fixture
def seeded(db: SessionDB) -> SessionDB:
    """A few sessions and messages, so that "unchanged" has something to compare."""
    db.create_session("s1", "cli", model="m1", model_config={"t": 0.5}, system_prompt="sp")
    db.set_session_title("s1", "Seed Title")
    db.create_session("s2", "telegram", parent_session_id="s1")
    db.create_session("123", "cli")  # an id an int 123 could be confused with
    db.append_message("s1", "user", "seedword question")
    db.append_message("s1", "assistant", "seedword answer", tool_calls=[{"id": "c1"}])
    db.append_messages("s2", [{"role": "user", "content": "seedword again"}])
    db.update_token_counts("s1", input_tokens=10, output_tokens=5, estimated_cost_usd=0.01)
    db.end_session("s2", "compressed")
    assert len(snapshot(db)["fts_seedword"]) == 3
    return db


# ----------------------------------------------------------------------
# SQL metacharacters and LIKE wildcards: stored and returned literally
# ----------------------------------------------------------------------
HOSTILE_IDS = [
    "'; DROP TABLE sessions; --",
    "Robert'); DROP TABLE messages;--",
    '" OR 1=1 --',
    "s1' OR '1'='1",
    "%",
    "_",
    "s%",
    "s_",
    "a%b_c\\",
    "\\",
    "*",
    "NULL",
    "$1 ? :p_id @x",
    "id with spaces",
    "日本語のセッション",
]


@pytest.mark.parametrize("hostile", HOSTILE_IDS)
def test_hostile_ids_and_text_are_stored_literally(seeded: SessionDB, hostile: str) -> None:
    db = seeded
    tables_before = {row[1] for row in snapshot(seeded)["schema"]}
    s1_before = db.get_session("s1")
    s1_messages = db.get_messages("s1")

    assert db.create_session(hostile, hostile, model=hostile, system_prompt=hostile) == hostile
    db.create_session(f"child of {hostile}", "cli", parent_session_id=hostile, user_id=hostile)
    first = db.append_message(hostile, hostile, hostile, tool_name=hostile, tool_call_id=hostile)
    db.append_messages(hostile, [{"role": "assistant", "content": f"seedword {hostile}"}])
    db.update_token_counts(hostile, input_tokens=1, cost_status=hostile, billing_mode=hostile)
    db.update_system_prompt(hostile, hostile + hostile)
    db.end_session(hostile, hostile)
    db.reopen_session(hostile)
    db.set_session_title(hostile, hostile)

    session = db.get_session(hostile)
    assert session["id"] == hostile and session["source"] == hostile
    assert session["model"] == hostile and session["title"] == hostile
    assert session["system_prompt"] == hostile + hostile
    assert session["cost_status"] == hostile and session["billing_mode"] == hostile
    assert session["message_count"] == 2 and session["input_tokens"] == 1
    messages = db.get_messages(hostile)
    assert messages[0]["id"] == first
    assert [m["content"] for m in messages] == [hostile, f"seedword {hostile}"]
    assert messages[0]["role"] == hostile and messages[0]["tool_name"] == hostile
    assert db.message_count(hostile) == 2
    assert db.get_session_by_title(hostile)["id"] == hostile
    assert db.resolve_session_by_title(hostile) == hostile
    assert db.get_next_title_in_lineage(hostile) == f"{hostile} #2"
    assert [a["id"] for a in db.get_ancestors(f"child of {hostile}")] == [
        f"child of {hostile}",
        hostile,
    ]
    assert {d["id"] for d in db.get_descendants(hostile)} == {hostile, f"child of {hostile}"}
    assert db.export_session(hostile)["messages"] == messages
    assert db.session_count(hostile) == 1
    assert [s["id"] for s in db.search_sessions(source=hostile)] == [hostile]
    assert isinstance(db.search_messages(hostile), list)
    hits = db.search_messages("seedword", source_filter=[hostile])
    assert [h["session_id"] for h in hits] == [hostile]

    # nothing else was touched; no table was dropped
    assert {row[1] for row in snapshot(seeded)["schema"]} == tables_before
    assert db.get_session("s1") == s1_before
    assert db.get_messages("s1") == s1_messages
    assert db.session_count() == 5

    # deleting the hostile session deletes only it
    assert db.delete_session(hostile) is True
    assert db.get_session(hostile) is None
    assert db.get_session(f"child of {hostile}")["parent_session_id"] is None
    assert {s["id"] for s in db.search_sessions()} == {"s1", "s2", "123", f"child of {hostile}"}
    assert db.get_messages("s1") == s1_messages
    assert db.message_count() == 3


@pytest.mark.parametrize("pattern", ["%", "_", "s%", "s_", "%1", "_1", "*", "s?"])
def test_wildcard_ids_match_nothing_but_themselves(seeded: SessionDB, pattern: str) -> None:
    db = seeded
    assert db.get_session(pattern) is None
    assert db.get_messages(pattern) == []
    assert db.message_count(pattern) == 0
    assert db.get_ancestors(pattern) == []
    assert db.export_session(pattern) is None
    assert db.get_session_by_title(pattern) is None
    assert db.resolve_session_by_title(pattern) is None
    assert db.session_count(pattern) == 0
    before = snapshot(seeded)
    assert db.delete_session(pattern) is False
    assert db.prune_sessions(0, source=pattern) == 0
    assert snapshot(seeded) == before


@pytest.mark.parametrize(
    "title",
    ["'; DROP TABLE sessions; --", "100% done", "snake_case_title", "back\\slash", '"quoted"'],
)
def test_hostile_titles_are_literal(seeded: SessionDB, title: str) -> None:
    db = seeded
    db.set_session_title("123", title)
    assert db.get_session_title("123") == title
    assert db.get_session_by_title(title)["id"] == "123"
    assert db.resolve_session_by_title(title) == "123"
    assert db.get_next_title_in_lineage(title) == f"{title} #2"
    assert db.get_session_title("s1") == "Seed Title"
    assert db.session_count() == 3
    with pytest.raises(TitleConflictError):
        db.set_session_title("s2", title)


# ----------------------------------------------------------------------
# FTS operators and unbalanced quotes in search
# ----------------------------------------------------------------------
HOSTILE_QUERIES = [
    "'; DROP TABLE messages; --",
    '"',
    '"unbalanced',
    'a" OR "b',
    '"""',
    "(((",
    ")",
    "NEAR(seedword",
    "NEAR(a b, 3)",
    "content:seedword",
    "{content}: seedword",
    "- seedword",
    "^seedword",
    "seedword AND AND OR NOT",
    "NOT seedword",
    "*",
    "seed*word*",
    "%",
    "_",
    "\\",
    "\x00",
    "\x00seedword\x00",
    "\ud800",
    "seed\udfffword",
    "'",
    "' OR 1=1 --",
    "rank:1",
    "messages_fts MATCH 'x'",
    "+++---***",
    "\u200b\ufeff",
    "a" * 5000,
    " OR ".join(["seedword"] * 300),
]


@pytest.mark.parametrize("query", HOSTILE_QUERIES)
def test_hostile_search_queries_return_a_list_and_change_nothing(
    seeded: SessionDB, query: str
) -> None:
    before = snapshot(seeded)
    results = seeded.search_messages(query)
    assert isinstance(results, list)
    for result in results:
        assert result["session_id"] in {"s1", "s2"}
        assert ">>>" in result["snippet"] and "<<<" in result["snippet"]
    assert snapshot(seeded) == before


def test_hostile_queries_still_find_what_they_can(seeded: SessionDB) -> None:
    db = seeded
    seed_ids = {m["id"] for m in db.get_messages("s1") + db.get_messages("s2")}
    assert {r["id"] for r in db.search_messages('"seedword')} == seed_ids
    assert {r["id"] for r in db.search_messages("seedword AND AND OR NOT")} == seed_ids
    assert {r["id"] for r in db.search_messages("\x00seedword\x00")} == seed_ids
    assert db.search_messages("NOT seedword") == [], "only an exclusion finds nothing"
    assert db.search_messages("'; DROP TABLE messages; --") == []


def test_content_full_of_sql_and_fts_syntax_is_searchable(db: SessionDB) -> None:
    db.create_session("syn", "cli")
    hostile = "'; DROP TABLE messages; -- C++ (templates) AND \"unbalanced NEAR(x) col:val *"
    message_id = db.append_message("syn", "user", hostile)
    assert db.get_messages("syn")[0]["content"] == hostile
    for query in ("DROP TABLE", "C++", "templates AND unbalanced", '"unbalanced', "col:val"):
        assert [r["id"] for r in db.search_messages(query)] == [message_id], query


# ----------------------------------------------------------------------
# NUL, control characters, huge content: exact round trips
# ----------------------------------------------------------------------
CONTROL_TEXT = (
    "start\x00"
    + "".join(chr(i) for i in range(1, 32))
    + "\x7f\x80\x9b\x9f\u200b\u202e\ufeff\u2028\r\n\t"
    + "\x00\x00end\x00"
)


def test_nul_and_control_characters_round_trip_exactly(db: SessionDB, db_path: Path) -> None:
    text = CONTROL_TEXT
    db.create_session("ctl", "cli", model=text, system_prompt=text, user_id=text)
    db.append_message(
        "ctl",
        "assistant",
        text,
        tool_name=text,
        tool_call_id=text,
        finish_reason=text,
        reasoning=text,
        tool_calls=[{"arguments": text}],
        reasoning_details=[{"text": text}],
        codex_reasoning_items=[text],
    )
    db.end_session("ctl", text)
    session = db.get_session("ctl")
    for field in ("model", "system_prompt", "user_id", "end_reason"):
        assert session[field] == text, field
    (message,) = db.get_messages("ctl")
    for field in ("content", "tool_name", "tool_call_id", "finish_reason", "reasoning"):
        assert message[field] == text, field
    assert message["tool_calls"] == [{"arguments": text}]
    assert message["reasoning_details"] == [{"text": text}]
    assert message["codex_reasoning_items"] == [text]
    (turn,) = db.get_messages_as_conversation("ctl")
    assert turn["content"] == text and turn["reasoning"] == text
    assert db.export_session("ctl")["messages"][0]["content"] == text
    # on disk, byte for byte: nothing was truncated at a NUL
    with closing(sqlite3.connect(db_path)) as connection:
        (stored,) = connection.execute("SELECT content FROM messages").fetchone()
        (length,) = connection.execute(
            "SELECT length(CAST(content AS BLOB)) FROM messages"
        ).fetchone()
    assert stored == text
    assert length == len(text.encode("utf-8"))


@pytest.mark.sqlite_only("PostgreSQL text cannot hold U+0000; see the test below")
def test_nul_inside_content_does_not_hide_the_rest_from_search(db: SessionDB) -> None:
    db.create_session("nul", "cli")
    message_id = db.append_message("nul", "user", "alphaword\x00omegaword")
    assert [r["id"] for r in db.search_messages("alphaword")] == [message_id]
    assert [r["id"] for r in db.search_messages("omegaword")] == [message_id]


def test_nul_is_refused_by_postgresql_with_a_clear_error_and_nothing_written(pg_url: Any) -> None:
    with SessionDB(pg_url) as db:
        db.create_session("nul", "cli")
        with pytest.raises(InvalidInputError, match="NUL"):
            db.append_message("nul", "user", "alphaword\x00omegaword")
        with pytest.raises(InvalidInputError, match="NUL"):
            db.create_session("id\x00tail", "cli")
        with pytest.raises(InvalidInputError, match="NUL"):
            db.get_session("nul\x00")
        with pytest.raises(InvalidInputError, match="NUL"):
            db.end_session("nul\x00", "gone")
        with pytest.raises(InvalidInputError, match="NUL"):
            db.resolve_session_id("nu\x00")
        with pytest.raises(InvalidInputError, match="NUL"):
            db.get_compression_tip("nul\x00")
        with pytest.raises(InvalidInputError, match="NUL"):
            db.list_sessions_rich(exclude_sources=["cli\x00"])
        assert db.get_session("nul")["message_count"] == 0
        assert db.message_count() == 0 and db.session_count() == 1


@pytest.mark.sqlite_only("PostgreSQL text cannot hold U+0000")
def test_ids_with_nul_are_distinct_from_their_prefix(db: SessionDB) -> None:
    db.create_session("id\x00tail", "cli")
    db.append_message("id\x00tail", "user", "x")
    assert db.get_session("id") is None
    assert db.get_session("id\x00tail")["id"] == "id\x00tail"
    assert db.message_count("id") == 0 and db.message_count("id\x00tail") == 1
    db.create_session("id", "cli")  # not a duplicate
    assert db.session_count() == 2
    assert db.delete_session("id") is True
    assert db.get_session("id\x00tail") is not None


def test_control_characters_in_a_title_are_cleaned_not_stored(db: SessionDB) -> None:
    db.create_session("t", "cli")
    db.set_session_title("t", "Ti\x00tle\x1b\u200b with\ttab")
    assert db.get_session_title("t") == "Title with tab"


def test_ten_megabyte_content_round_trips(db: SessionDB, db_path: Path) -> None:
    size = 10 * 1024 * 1024
    tail = " tenmegabyteneedle"
    body = ("lorem ipsum dolor sit amet, 中文 é ✓ " * (size // 30 + 1))[: size - len(tail)]
    content = body + tail
    assert len(content) == size
    db.create_session("big", "cli")
    message_id = db.append_message("big", "user", content, reasoning=content[:1000])
    db.append_message("big", "assistant", "after the big one")
    (message, _after) = db.get_messages("big")
    assert message["id"] == message_id
    assert len(message["content"]) == size
    assert message["content"] == content
    assert db.export_session("big")["messages"][0]["content"] == content
    (hit,) = db.search_messages("tenmegabyteneedle")
    assert hit["id"] == message_id
    assert ">>>tenmegabyteneedle<<<" in hit["snippet"]
    assert hit["context"][0]["content"] == content[:200]
    assert hit["context"][1] == {"role": "assistant", "content": "after the big one"}
    with closing(sqlite3.connect(db_path)) as connection:
        (length,) = connection.execute(
            "SELECT length(content) FROM messages WHERE id = ?", (message_id,)
        ).fetchone()
    assert length == size


@pytest.mark.sqlite_only("SQLite's limit on a string's length (PostgreSQL's is its own)")
def test_content_longer_than_sqlite_takes_is_refused_and_writes_nothing(db: SessionDB) -> None:
    """A gigabyte of tool output: the store's error, not the driver's "unsupported type".

    One ASCII string just past SQLite's limit on a string (its UTF-8 the same
    bytes): the heaviest test on memory, kept because nothing smaller reaches it.
    """
    db.create_session("big", "cli")
    before = snapshot(db)
    with pytest.raises(InvalidInputError, match="too big for SQLite"):
        db.append_message("big", "tool", "z" * 1_000_000_001)
    assert snapshot(db) == before


# ----------------------------------------------------------------------
# lone surrogates: UTF-8 cannot store them. In a session's name (its id, its
# parent, its source) they are refused before anything is written; in every
# other text they are stored as U+FFFD, with a log line (issue 27, item 4)
# ----------------------------------------------------------------------
LONE = "\ud800"
MID = "ok\udfffok"

SURROGATE_CALLS = [
    pytest.param(lambda db: db.create_session(LONE, "cli"), id="create-id"),
    pytest.param(lambda db: db.create_session(MID, "cli"), id="create-id-mid"),
    pytest.param(lambda db: db.create_session("new", LONE), id="create-source"),
    pytest.param(
        lambda db: db.create_session("new", "cli", parent_session_id=LONE), id="create-parent"
    ),
    pytest.param(lambda db: db.ensure_session(LONE), id="ensure-id"),
    pytest.param(lambda db: db.ensure_session("new", MID), id="ensure-source"),
    pytest.param(lambda db: db.end_session(LONE, "x"), id="end-id"),
    pytest.param(lambda db: db.reopen_session(LONE), id="reopen-id"),
    pytest.param(lambda db: db.update_system_prompt(LONE, "x"), id="prompt-id"),
    pytest.param(lambda db: db.update_token_counts(LONE, input_tokens=1), id="tokens-id"),
    pytest.param(lambda db: db.append_message(LONE, "user", "x"), id="append-id"),
    pytest.param(lambda db: db.delete_session(LONE), id="delete-id"),
    pytest.param(lambda db: db.resolve_session_id(LONE), id="resolve-id"),
    pytest.param(lambda db: db.resolve_session_id("s" + MID), id="resolve-id-mid"),
    pytest.param(lambda db: db.prune_sessions(0, source=LONE), id="prune-source"),
    pytest.param(lambda db: db.search_messages("x", source_filter=[LONE]), id="search-src"),
    pytest.param(lambda db: db.search_messages("x", exclude_sources=MID), id="search-excl"),
    pytest.param(lambda db: db.search_sessions(source=LONE), id="sessions-source"),
    pytest.param(lambda db: db.list_sessions_rich(source=LONE), id="rich-source"),
    pytest.param(lambda db: db.list_sessions_rich(exclude_sources=[LONE]), id="rich-excl"),
    pytest.param(lambda db: db.get_compression_tip(LONE), id="compression-tip"),
    pytest.param(lambda db: db.session_count(LONE), id="count-source"),
    pytest.param(lambda db: db.export_all(source=LONE), id="export-source"),
    pytest.param(
        lambda db: db.append_messages(LONE, [{"role": "user", "content": "ok"}]),
        id="append-many-id",
    ),
    pytest.param(lambda db: db.clear_messages(LONE), id="clear-id"),
]

SURROGATE_TEXTS = [
    pytest.param(lambda db: db.create_session("new", "cli", model=MID), id="create-model"),
    pytest.param(lambda db: db.create_session("new", "cli", system_prompt=LONE), id="create-sp"),
    pytest.param(lambda db: db.create_session("new", "cli", user_id=LONE), id="create-user"),
    pytest.param(lambda db: db.ensure_session("new", model=LONE), id="ensure-model"),
    pytest.param(lambda db: db.end_session("s1", MID), id="end-reason"),
    pytest.param(lambda db: db.update_system_prompt("s1", MID), id="prompt-text"),
    pytest.param(lambda db: db.update_token_counts("s1", model=LONE), id="tokens-model"),
    pytest.param(lambda db: db.update_token_counts("s1", cost_status=MID), id="tokens-label"),
    pytest.param(
        lambda db: db.update_token_counts("s1", billing_base_url=LONE), id="tokens-billing"
    ),
    pytest.param(lambda db: db.append_message("s1", LONE, "x"), id="append-role"),
    pytest.param(lambda db: db.append_message("s1", "user", LONE), id="append-content"),
    pytest.param(lambda db: db.append_message("s1", "user", MID), id="append-content-mid"),
    pytest.param(lambda db: db.append_message("s1", "tool", "x", tool_name=LONE), id="tool-name"),
    pytest.param(
        lambda db: db.append_message("s1", "tool", "x", tool_call_id=LONE), id="tool-call-id"
    ),
    pytest.param(
        lambda db: db.append_message("s1", "assistant", "x", finish_reason=LONE), id="finish"
    ),
    pytest.param(lambda db: db.append_message("s1", "assistant", "x", reasoning=MID), id="reason"),
    pytest.param(
        lambda db: db.append_messages("s1", [{"role": "user", "content": "ok"}, {"role": LONE}]),
        id="append-many-role",
    ),
    pytest.param(lambda db: db.set_session_title("s1", LONE + "x"), id="title"),
    pytest.param(lambda db: db.set_session_title("s1", MID), id="title-mid"),
    pytest.param(lambda db: db.get_session_by_title(LONE), id="by-title"),
    pytest.param(lambda db: db.resolve_session_by_title(MID), id="resolve"),
    pytest.param(lambda db: db.get_next_title_in_lineage(LONE), id="next-title"),
    pytest.param(lambda db: db.search_messages("x", role_filter=[LONE]), id="search-role"),
]


@pytest.mark.parametrize("call", SURROGATE_CALLS)
def test_lone_surrogates_in_a_session_name_are_invalid_input(seeded: SessionDB, call: Call) -> None:
    error = assert_rejected(seeded, call)
    assert "surrogate" in str(error) or "Unicode" in str(error)


def _has_lone_surrogate(state: Any) -> bool:
    """True when any string in ``state`` (nested lists, tuples, dicts) holds a lone surrogate."""
    if isinstance(state, str):
        return any(0xD800 <= ord(c) <= 0xDFFF for c in state)
    if isinstance(state, dict):
        return any(_has_lone_surrogate(v) for v in (*state.keys(), *state.values()))
    if isinstance(state, list | tuple | set):
        return any(_has_lone_surrogate(v) for v in state)
    return False


@pytest.mark.parametrize("call", SURROGATE_TEXTS)
def test_lone_surrogates_in_a_text_are_stored_as_replacement_characters(
    seeded: SessionDB, call: Call, caplog: pytest.LogCaptureFixture
) -> None:
    before = snapshot(seeded)
    with caplog.at_level("WARNING", logger="hermes_store"):
        call(seeded)  # nothing of the turn is refused
    after = snapshot(seeded)
    assert _has_lone_surrogate([{"x": ("a", MID)}]), "the probe must see one"
    assert not _has_lone_surrogate(after)
    if after != before:  # a write: the text is there, with U+FFFD in place
        assert "\ufffd" in repr(after) and "\ufffd" not in repr(before)
    assert any("lone surrogate" in r.getMessage() for r in caplog.records)


def test_surrogate_in_a_search_query_is_not_an_error(seeded: SessionDB) -> None:
    seed_ids = {m["id"] for m in seeded.get_messages("s1") + seeded.get_messages("s2")}
    assert {r["id"] for r in seeded.search_messages(f"seedword{LONE}")} == seed_ids
    assert seeded.search_messages(LONE) == []


READ_METHODS = [
    "get_session",
    "get_session_title",
    "get_messages",
    "get_messages_as_conversation",
    "message_count",
    "get_ancestors",
    "get_descendants",
    "export_session",
]


def _read_outcomes(db: SessionDB, session_id: Any) -> list[str]:
    """Which read methods did *not* raise InvalidInputError for ``session_id``."""
    wrong = []
    for name in READ_METHODS:
        try:
            result = getattr(db, name)(session_id)
        except InvalidInputError:
            continue
        except Exception as error:
            wrong.append(f"{name}: raised {type(error).__name__}: {error}")
        else:
            wrong.append(f"{name}: returned {result!r:.60}")
    return wrong


def test_regression_read_methods_let_lone_surrogates_reach_the_driver(seeded: SessionDB) -> None:
    """Regression (was a package bug): read methods taking a session id do not check it.

    ``get_session``, ``get_session_title``, ``get_messages``,
    ``get_messages_as_conversation``, ``message_count``, ``get_ancestors``,
    ``get_descendants`` and ``export_session`` pass a lone surrogate straight to
    the driver, which raises a bare ``UnicodeEncodeError`` naming no argument
    (the docs promised ``InvalidInputError`` for "text that is not valid
    Unicode"). Fix: hermes_store/facade.py, first line of each of these methods:
    ``text_arg("session_id", session_id)`` (``optional=True`` in ``message_count``).
    """
    before = snapshot(seeded)
    wrong = _read_outcomes(seeded, LONE)
    assert snapshot(seeded) == before
    assert wrong == []


def test_regression_read_methods_accept_an_int_session_id(seeded: SessionDB, db_path: Path) -> None:
    """Regression (was a package bug): an int session id is not refused by read methods.

    SQLite's TEXT affinity turns 123 into '123', so ``get_session(123)``
    silently returns the session whose id is the string ``"123"`` (and the other
    readers its messages/lineage) instead of raising ``InvalidInputError`` for a
    wrong type. Fix: as above, ``text_arg("session_id", session_id)`` at the top
    of each read method in hermes_store/facade.py.
    """
    raw = sqlite3.connect(db_path)  # the confusion is real: SQLite matches 123 to '123'
    assert raw.execute("SELECT COUNT(*) FROM sessions WHERE id = 123").fetchone() == (1,)
    raw.close()
    before = snapshot(seeded)
    wrong = _read_outcomes(seeded, 123)
    assert snapshot(seeded) == before
    assert wrong == []


def test_regression_set_session_title_does_not_check_the_session_id(seeded: SessionDB) -> None:
    """Regression (was a package bug): ``set_session_title`` writes without checking ``session_id``.

    ``set_session_title(123, "T")`` sets the title of session ``"123"`` (TEXT
    affinity), and ``set_session_title("\\ud800", "T")`` raises a bare
    ``UnicodeEncodeError`` from inside the write transaction. Every other write
    method refuses both with ``InvalidInputError`` before the transaction.
    Fix: hermes_store/facade.py, ``set_session_title``: add
    ``text_arg("session_id", session_id)`` before ``clean_title(title)``.
    """
    problems = []
    for bad_id in (123, LONE):
        before = snapshot(seeded)
        try:
            seeded.set_session_title(bad_id, "Type Confused")
        except InvalidInputError:
            pass
        except Exception as error:
            problems.append(f"{bad_id!r}: raised {type(error).__name__}")
        else:
            problems.append(f"{bad_id!r}: accepted")
        if snapshot(seeded) != before:
            problems.append(f"{bad_id!r}: database changed")
    assert seeded.get_session_title("123") is None, problems
    assert problems == []


# ----------------------------------------------------------------------
# wrong types
# ----------------------------------------------------------------------
class Unserializable:
    pass


def _circular() -> list[Any]:
    loop: list[Any] = []
    loop.append(loop)
    return loop


WRONG_TYPES = [
    # create_session
    pytest.param(lambda db: db.create_session(123, "cli"), id="create-int-id"),
    pytest.param(lambda db: db.create_session(None, "cli"), id="create-none-id"),
    pytest.param(lambda db: db.create_session(b"bytes", "cli"), id="create-bytes-id"),
    pytest.param(lambda db: db.create_session("", "cli"), id="create-empty-id"),
    pytest.param(lambda db: db.create_session("   ", "cli"), id="create-blank-id"),
    pytest.param(lambda db: db.create_session("new", 5), id="create-int-source"),
    pytest.param(lambda db: db.create_session("new", ""), id="create-empty-source"),
    pytest.param(lambda db: db.create_session("new", "cli", model=1), id="create-int-model"),
    pytest.param(
        lambda db: db.create_session("new", "cli", system_prompt=["x"]), id="create-list-sp"
    ),
    pytest.param(lambda db: db.create_session("new", "cli", user_id=7), id="create-int-user"),
    pytest.param(
        lambda db: db.create_session("new", "cli", parent_session_id=123), id="create-int-parent"
    ),
    pytest.param(
        lambda db: db.create_session("new", "cli", model_config={"x": Unserializable()}),
        id="create-unserializable-config",
    ),
    pytest.param(
        lambda db: db.create_session("new", "cli", model_config={"t": float("nan")}),
        id="create-nan-config",
    ),
    # ensure_session
    pytest.param(lambda db: db.ensure_session(123), id="ensure-int-id"),
    pytest.param(lambda db: db.ensure_session(" "), id="ensure-blank-id"),
    pytest.param(lambda db: db.ensure_session("new", source=5), id="ensure-int-source"),
    pytest.param(lambda db: db.ensure_session("new", source=""), id="ensure-empty-source"),
    pytest.param(lambda db: db.ensure_session("new", model=["m"]), id="ensure-list-model"),
    # end / reopen / prompt
    pytest.param(lambda db: db.end_session(123, "x"), id="end-int-id"),
    pytest.param(lambda db: db.end_session("s1", 5), id="end-int-reason"),
    pytest.param(lambda db: db.reopen_session(1.5), id="reopen-float-id"),
    pytest.param(lambda db: db.reopen_session(None), id="reopen-none-id"),
    pytest.param(lambda db: db.update_system_prompt(123, "x"), id="prompt-int-id"),
    pytest.param(lambda db: db.update_system_prompt("s1", {"a": 1}), id="prompt-dict"),
    # update_token_counts
    pytest.param(lambda db: db.update_token_counts(123, input_tokens=1), id="tokens-int-id"),
    pytest.param(lambda db: db.update_token_counts("s1", input_tokens="5"), id="tokens-str"),
    pytest.param(lambda db: db.update_token_counts("s1", output_tokens=True), id="tokens-bool"),
    pytest.param(
        lambda db: db.update_token_counts("s1", cache_read_tokens=False), id="tokens-false"
    ),
    pytest.param(lambda db: db.update_token_counts("s1", reasoning_tokens=1.5), id="tokens-float"),
    pytest.param(
        lambda db: db.update_token_counts("s1", input_tokens=1, output_tokens="2"),
        id="tokens-second-bad",
    ),
    pytest.param(lambda db: db.update_token_counts("s1", estimated_cost_usd="0.1"), id="cost-str"),
    pytest.param(lambda db: db.update_token_counts("s1", actual_cost_usd=True), id="cost-bool"),
    pytest.param(
        lambda db: db.update_token_counts("s1", estimated_cost_usd=float("nan")), id="cost-nan"
    ),
    pytest.param(
        lambda db: db.update_token_counts("s1", actual_cost_usd=float("inf")), id="cost-inf"
    ),
    pytest.param(lambda db: db.update_token_counts("s1", model=5), id="tokens-int-model"),
    pytest.param(
        lambda db: db.update_token_counts("s1", billing_provider=["x"]), id="tokens-list-label"
    ),
    pytest.param(lambda db: db.update_token_counts("s1", absolute="yes"), id="absolute-str"),
    pytest.param(lambda db: db.update_token_counts("s1", absolute=1), id="absolute-int"),
    pytest.param(
        lambda db: db.update_token_counts("s1", input_tokens=-1, absolute=True),
        id="absolute-negative",
    ),
    # append_message
    pytest.param(lambda db: db.append_message(123, "user", "x"), id="append-int-id"),
    pytest.param(lambda db: db.append_message("s1", 5, "x"), id="append-int-role"),
    pytest.param(lambda db: db.append_message("s1", "", "x"), id="append-empty-role"),
    pytest.param(lambda db: db.append_message("s1", None, "x"), id="append-none-role"),
    pytest.param(lambda db: db.append_message("s1", "user", {"a": 1}), id="append-dict-content"),
    pytest.param(lambda db: db.append_message("s1", "user", ["a"]), id="append-list-content"),
    pytest.param(lambda db: db.append_message("s1", "user", b"raw"), id="append-bytes-content"),
    pytest.param(lambda db: db.append_message("s1", "user", 42), id="append-int-content"),
    pytest.param(
        lambda db: db.append_message("s1", "user", "x", token_count="12"), id="token-count-str"
    ),
    pytest.param(
        lambda db: db.append_message("s1", "user", "x", token_count=True), id="token-count-bool"
    ),
    pytest.param(
        lambda db: db.append_message("s1", "user", "x", token_count=1.0), id="token-count-float"
    ),
    pytest.param(lambda db: db.append_message("s1", "tool", "x", tool_name=1), id="tool-name-int"),
    pytest.param(
        lambda db: db.append_message("s1", "tool", "x", tool_call_id=["c"]), id="tool-call-id-list"
    ),
    pytest.param(lambda db: db.append_message("s1", "user", "x", finish_reason=0), id="finish-int"),
    pytest.param(
        lambda db: db.append_message("s1", "user", "x", reasoning={"r": 1}), id="reasoning-dict"
    ),
    # append_messages
    pytest.param(lambda db: db.append_messages(123, [{"role": "user"}]), id="many-int-id"),
    pytest.param(lambda db: db.append_messages("s1", "not a list"), id="many-str"),
    pytest.param(lambda db: db.append_messages("s1", {"role": "user"}), id="many-dict"),
    pytest.param(lambda db: db.append_messages("s1", None), id="many-none"),
    pytest.param(lambda db: db.append_messages("s1", [1, 2]), id="many-ints"),
    pytest.param(
        lambda db: db.append_messages("s1", ({"role": "user"} for _ in range(2))),
        id="many-generator",
    ),
    pytest.param(lambda db: db.append_messages("s1", [{"content": "x"}]), id="many-no-role"),
    pytest.param(
        lambda db: db.append_messages("s1", [{"role": "user", "session_id": "s2"}]),
        id="many-session-id-field",
    ),
    pytest.param(
        lambda db: db.append_messages("s1", [{"role": "user", "content": {"a": 1}}]),
        id="many-dict-content",
    ),
    # resolve_session_id
    pytest.param(lambda db: db.resolve_session_id(123), id="resolve-id-int"),
    pytest.param(lambda db: db.resolve_session_id(None), id="resolve-id-none"),
    pytest.param(lambda db: db.resolve_session_id(b"s1"), id="resolve-id-bytes"),
    pytest.param(lambda db: db.resolve_session_id(["s1"]), id="resolve-id-list"),
    # titles
    pytest.param(lambda db: db.set_session_title("s1", 5), id="title-int"),
    pytest.param(lambda db: db.set_session_title("s1", ["t"]), id="title-list"),
    pytest.param(lambda db: db.set_session_title("s1", "x" * 101), id="title-too-long"),
    pytest.param(lambda db: db.get_session_by_title(5), id="by-title-int"),
    pytest.param(lambda db: db.resolve_session_by_title(None), id="resolve-none"),
    pytest.param(lambda db: db.get_next_title_in_lineage(5), id="next-title-int"),
    # search and listing
    pytest.param(lambda db: db.search_messages(5), id="search-int-query"),
    pytest.param(lambda db: db.search_messages(None), id="search-none-query"),
    pytest.param(lambda db: db.search_messages(b"seedword"), id="search-bytes-query"),
    pytest.param(lambda db: db.search_messages("x", source_filter=5), id="search-int-filter"),
    pytest.param(lambda db: db.search_messages("x", role_filter=[1]), id="search-int-role"),
    pytest.param(
        lambda db: db.search_messages("x", exclude_sources={"a": 1}), id="search-dict-excl"
    ),
    pytest.param(lambda db: db.search_messages("x", limit="5"), id="search-str-limit"),
    pytest.param(lambda db: db.search_messages("x", limit=-1), id="search-negative-limit"),
    pytest.param(lambda db: db.search_messages("x", limit=True), id="search-bool-limit"),
    pytest.param(lambda db: db.search_messages("x", offset=-1), id="search-negative-offset"),
    pytest.param(lambda db: db.search_messages("x", offset=1.5), id="search-float-offset"),
    pytest.param(lambda db: db.search_sessions(source=5), id="sessions-int-source"),
    pytest.param(lambda db: db.search_sessions(limit="a"), id="sessions-str-limit"),
    pytest.param(lambda db: db.search_sessions(offset=-3), id="sessions-negative-offset"),
    pytest.param(lambda db: db.list_sessions_rich(limit=-1), id="rich-negative-limit"),
    pytest.param(lambda db: db.list_sessions_rich(source=["cli"]), id="rich-list-source"),
    pytest.param(lambda db: db.list_sessions_rich(exclude_sources=5), id="rich-int-excl"),
    pytest.param(lambda db: db.list_sessions_rich(exclude_sources=[1]), id="rich-int-excl-item"),
    pytest.param(lambda db: db.list_sessions_rich(include_children="yes"), id="rich-str-children"),
    pytest.param(lambda db: db.list_sessions_rich(include_children=1), id="rich-int-children"),
    pytest.param(
        lambda db: db.list_sessions_rich(project_compression_tips=None), id="rich-none-tips"
    ),
    pytest.param(lambda db: db.list_sessions_rich(offset="1"), id="rich-str-offset"),
    pytest.param(lambda db: db.get_compression_tip(123), id="compression-tip-int"),
    pytest.param(lambda db: db.get_compression_tip(None), id="compression-tip-none"),
    pytest.param(lambda db: db.session_count(5), id="count-int-source"),
    pytest.param(lambda db: db.top_sessions_by_tokens("3"), id="top-str-limit"),
    pytest.param(lambda db: db.top_sessions_by_tokens(-1), id="top-negative-limit"),
    # export, prune, delete, clear
    pytest.param(lambda db: db.export_all(source=5), id="export-int-source"),
    pytest.param(lambda db: list(db.iter_export(source=5)), id="iter-export-int-source"),
    pytest.param(lambda db: db.prune_sessions("90"), id="prune-str-days"),
    pytest.param(lambda db: db.prune_sessions(True), id="prune-bool-days"),
    pytest.param(lambda db: db.prune_sessions(-1), id="prune-negative-days"),
    pytest.param(lambda db: db.prune_sessions(float("nan")), id="prune-nan-days"),
    pytest.param(lambda db: db.prune_sessions(None), id="prune-none-days"),
    pytest.param(lambda db: db.prune_sessions(0, source=5), id="prune-int-source"),
    pytest.param(lambda db: db.delete_session(123), id="delete-int-id"),
    pytest.param(lambda db: db.delete_session(None), id="delete-none-id"),
    pytest.param(lambda db: db.delete_session(["s1"]), id="delete-list-id"),
    pytest.param(lambda db: db.clear_messages(123), id="clear-int-id"),
    pytest.param(lambda db: db.clear_messages(None), id="clear-none-id"),
]


@pytest.mark.parametrize("call", WRONG_TYPES)
def test_wrong_types_are_invalid_input(seeded: SessionDB, call: Call) -> None:
    error = assert_rejected(seeded, call)
    assert isinstance(error, ValueError)
    assert str(error)  # names what was wrong


def test_int_id_does_not_reach_the_session_it_looks_like(seeded: SessionDB) -> None:
    """Writes refuse 123 instead of acting on the session whose id is "123"."""
    for call in (
        lambda: seeded.append_message(123, "user", "x"),
        lambda: seeded.end_session(123, "x"),
        lambda: seeded.update_token_counts(123, input_tokens=5),
        lambda: seeded.delete_session(123),
        lambda: seeded.clear_messages(123),
    ):
        with pytest.raises(InvalidInputError):
            call()
    session = seeded.get_session("123")
    assert session["message_count"] == 0 and session["ended_at"] is None
    assert session["input_tokens"] == 0


# ----------------------------------------------------------------------
# unknown sessions on every write method
# ----------------------------------------------------------------------
UNKNOWN_IDS = ["ghost", "S1", "s1 ", " s1", "s1\x00", "%", "s_", "' OR '1'='1", "", "*", "12"]


def unknown_ids(db: SessionDB) -> list[str]:
    """UNKNOWN_IDS this backend can look up: PostgreSQL refuses U+0000 (test_nul_is_refused...)."""
    return [i for i in UNKNOWN_IDS if db.db_path is not None or "\x00" not in i]


WRITES_TO: dict[str, Callable[[SessionDB, str], Any]] = {
    "end_session": lambda db, sid: db.end_session(sid, "user_exit"),
    "reopen_session": lambda db, sid: db.reopen_session(sid),
    "update_system_prompt": lambda db, sid: db.update_system_prompt(sid, "new prompt"),
    "update_token_counts": lambda db, sid: db.update_token_counts(sid, input_tokens=5),
    "update_token_counts_absolute": lambda db, sid: db.update_token_counts(
        sid, input_tokens=5, absolute=True
    ),
    "append_message": lambda db, sid: db.append_message(sid, "user", "seedword lost"),
    "append_messages": lambda db, sid: db.append_messages(
        sid, [{"role": "user", "content": "seedword a"}, {"role": "assistant", "content": "b"}]
    ),
    "clear_messages": lambda db, sid: db.clear_messages(sid),
}


@pytest.mark.parametrize("method", sorted(WRITES_TO))
def test_unknown_session_on_write_raises_not_found(seeded: SessionDB, method: str) -> None:
    write = WRITES_TO[method]
    for unknown in unknown_ids(seeded):
        error = assert_rejected(
            seeded, lambda db, sid=unknown: write(db, sid), SessionNotFoundError
        )
        assert isinstance(error, LookupError)
        assert error.session_id == unknown


@pytest.mark.parametrize("title", ["Brand New Title", None, "Seed Title #2"])
def test_set_title_of_unknown_session_returns_false(seeded: SessionDB, title: str | None) -> None:
    for unknown in unknown_ids(seeded):
        before = snapshot(seeded)
        assert seeded.set_session_title(unknown, title) is False
        assert snapshot(seeded) == before


@pytest.mark.parametrize("unknown", UNKNOWN_IDS)
def test_delete_unknown_session_returns_false(seeded: SessionDB, unknown: str) -> None:
    if unknown not in unknown_ids(seeded):
        assert_rejected(seeded, lambda db: db.delete_session(unknown))  # NUL on PostgreSQL
        return
    before = snapshot(seeded)
    assert seeded.delete_session(unknown) is False
    assert snapshot(seeded) == before


def test_create_with_unknown_parent_is_invalid_input(seeded: SessionDB) -> None:
    for unknown in UNKNOWN_IDS:  # a NUL in the parent id is invalid input on PostgreSQL too
        assert_rejected(
            seeded,
            lambda db, sid=unknown: db.create_session("newborn", "cli", parent_session_id=sid),
        )


def test_unknown_session_reads_are_empty(seeded: SessionDB) -> None:
    for unknown in unknown_ids(seeded):
        assert seeded.get_session(unknown) is None
        assert seeded.get_session_title(unknown) is None
        assert seeded.get_messages(unknown) == []
        assert seeded.get_messages_as_conversation(unknown) == []
        assert seeded.message_count(unknown) == 0
        assert seeded.get_ancestors(unknown) == []
        assert seeded.get_descendants(unknown) == []
        assert seeded.export_session(unknown) is None


# ----------------------------------------------------------------------
# JSON fields that cannot be serialized
# ----------------------------------------------------------------------
UNSERIALIZABLE = [
    pytest.param([Unserializable()], id="object"),
    pytest.param({1, 2}, id="set"),
    pytest.param([float("nan")], id="nan"),
    pytest.param([{"x": float("inf")}], id="inf"),
    pytest.param(b"bytes", id="bytes"),
    pytest.param([{"f": print}], id="function"),
    pytest.param([decimal.Decimal("1.5")], id="decimal"),
    pytest.param([{"at": datetime.datetime(2026, 4, 16)}], id="datetime"),
    pytest.param(_circular(), id="circular"),
    pytest.param({(1, 2): "tuple key"}, id="tuple-key"),
]


@pytest.mark.parametrize("value", UNSERIALIZABLE)
@pytest.mark.parametrize("field", ["tool_calls", "reasoning_details", "codex_reasoning_items"])
def test_unserializable_json_fields_are_invalid_input(
    seeded: SessionDB, field: str, value: Any
) -> None:
    error = assert_rejected(
        seeded, lambda db: db.append_message("s1", "assistant", "x", **{field: value})
    )
    assert field in str(error)
    assert_rejected(
        seeded,
        lambda db: db.append_messages(
            "s1", [{"role": "user", "content": "fine"}, {"role": "assistant", field: value}]
        ),
    )


@pytest.mark.parametrize("value", UNSERIALIZABLE)
def test_unserializable_model_config_is_invalid_input(seeded: SessionDB, value: Any) -> None:
    assert_rejected(seeded, lambda db: db.create_session("new", "cli", model_config=value))
    assert seeded.get_session("new") is None


def test_odd_but_serializable_json_round_trips(seeded: SessionDB) -> None:
    calls = [{"id": "c1", "args": {"text": 'NUL\x00 quote" back\\slash', "n": [1, 2.5, None]}}]
    details = [{"unicode": "中文 🚀", "lone": "\ud800 becomes U+FFFD"}]
    seeded.append_message("s1", "assistant", None, tool_calls=calls, reasoning_details=details)
    last = seeded.get_messages("s1")[-1]
    assert last["tool_calls"] == calls
    assert last["reasoning_details"] == [{"unicode": "中文 🚀", "lone": "\ufffd becomes U+FFFD"}]


# ----------------------------------------------------------------------
# counters that would go wrong quietly: past 64 (PostgreSQL: 32) bits, not finite, negative
# ----------------------------------------------------------------------
TOKEN_COUNTERS = [
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
]


def counter_limit(db: SessionDB) -> int:
    """The largest token counter the backend's column holds (INTEGER: 64 or 32 bits)."""
    return 2**63 - 1 if db.db_path is not None else 2**31 - 1


@pytest.mark.parametrize("counter", TOKEN_COUNTERS)
def test_a_token_sum_past_the_column_is_refused_and_writes_nothing(
    seeded: SessionDB, counter: str
) -> None:
    # SQLite turned the column into the float 9.223372036854776e18 instead.
    half = counter_limit(seeded) // 2 + 1
    seeded.update_token_counts("s2", **{counter: half})
    error = assert_rejected(seeded, lambda db: db.update_token_counts("s2", **{counter: half}))
    assert counter in str(error) or "out of range" in str(error)
    assert seeded.get_session("s2")[counter] == half


@pytest.mark.parametrize("cost", ["estimated_cost_usd", "actual_cost_usd"])
def test_a_cost_sum_that_is_not_finite_is_refused_and_writes_nothing(
    seeded: SessionDB, cost: str
) -> None:
    # SQLite stored inf instead.
    seeded.update_token_counts("s2", **{cost: 1e308})
    error = assert_rejected(seeded, lambda db: db.update_token_counts("s2", **{cost: 1e308}))
    assert cost in str(error) or "out of range" in str(error)
    assert seeded.get_session("s2")[cost] == 1e308


def test_a_counter_at_its_largest_still_takes_zero_and_absolute_values(seeded: SessionDB) -> None:
    largest = counter_limit(seeded)
    seeded.update_token_counts("s2", input_tokens=largest, estimated_cost_usd=1e308)
    seeded.update_token_counts("s2", input_tokens=0, output_tokens=1, estimated_cost_usd=0.0)
    session = seeded.get_session("s2")
    assert (session["input_tokens"], session["output_tokens"]) == (largest, 1)
    assert session["estimated_cost_usd"] == 1e308
    seeded.update_token_counts("s2", output_tokens=largest, absolute=True)
    assert seeded.get_session("s2")["output_tokens"] == largest
    # Both counters at their largest: the report's sum (and its index) widen, never overflow.
    top = seeded.top_sessions_by_tokens(1)
    assert [entry["id"] for entry in top] == ["s2"] and top[0]["total_tokens"] >= largest


NEGATIVE_COUNTS = [
    pytest.param(lambda db: db.append_message("s1", "user", "x", token_count=-1), id="token-count"),
    pytest.param(
        lambda db: db.append_messages("s1", [{"role": "user", "token_count": -5}]),
        id="many-token-count",
    ),
    *(
        pytest.param(lambda db, c=c: db.update_token_counts("s1", **{c: -1}), id=f"{c}-increment")
        for c in TOKEN_COUNTERS
    ),
    pytest.param(
        lambda db: db.update_token_counts("s1", estimated_cost_usd=-0.5), id="estimated-cost"
    ),
    pytest.param(lambda db: db.update_token_counts("s1", actual_cost_usd=-1), id="actual-cost"),
    pytest.param(
        lambda db: db.update_token_counts("s1", actual_cost_usd=-1.0, absolute=True),
        id="actual-cost-absolute",
    ),
]


@pytest.mark.parametrize("call", NEGATIVE_COUNTS)
def test_negative_token_counts_and_costs_are_invalid_input(seeded: SessionDB, call: Call) -> None:
    error = assert_rejected(seeded, call)
    assert ">= 0" in str(error)


# ----------------------------------------------------------------------
# numbers past 64 bits or past a float, JSON nested past the recursion limit, non-text keys
# ----------------------------------------------------------------------
def _nested(depth: int) -> Any:
    value: Any = "bottom"
    for _ in range(depth):
        value = [value]
    return value


HUGE = 2**63  # one past SQLite's (and PostgreSQL's BIGINT) largest integer
BIGGER_THAN_A_FLOAT = 10**400

OUT_OF_RANGE = [
    pytest.param(
        lambda db: db.append_message("s1", "user", "x", token_count=HUGE), id="token-count"
    ),
    pytest.param(
        lambda db: db.append_messages("s1", [{"role": "user", "token_count": HUGE}]),
        id="many-token-count",
    ),
    *(
        pytest.param(lambda db, c=c: db.update_token_counts("s1", **{c: HUGE}), id=c)
        for c in TOKEN_COUNTERS
    ),
    pytest.param(
        lambda db: db.update_token_counts("s1", input_tokens=HUGE, absolute=True),
        id="input-tokens-absolute",
    ),
    pytest.param(lambda db: db.search_messages("seedword", limit=HUGE), id="search-limit"),
    pytest.param(lambda db: db.search_messages("seedword", offset=HUGE), id="search-offset"),
    pytest.param(lambda db: db.list_sessions_rich(limit=HUGE), id="rich-limit"),
    pytest.param(lambda db: db.list_sessions_rich(offset=HUGE), id="rich-offset"),
    pytest.param(lambda db: db.search_sessions(limit=HUGE), id="sessions-limit"),
    pytest.param(lambda db: db.top_sessions_by_tokens(HUGE), id="top-limit"),
    pytest.param(
        lambda db: db.update_token_counts("s1", estimated_cost_usd=BIGGER_THAN_A_FLOAT),
        id="estimated-cost",
    ),
    pytest.param(
        lambda db: db.update_token_counts("s1", actual_cost_usd=-BIGGER_THAN_A_FLOAT),
        id="actual-cost",
    ),
    pytest.param(lambda db: db.prune_sessions(BIGGER_THAN_A_FLOAT), id="prune-days"),
    pytest.param(
        lambda db: db.append_message("s1", "assistant", "x", tool_calls=_nested(5000)),
        id="tool-calls-deep",
    ),
    pytest.param(
        lambda db: db.append_messages(
            "s1", [{"role": "assistant", "reasoning_details": _nested(5000)}]
        ),
        id="many-reasoning-details-deep",
    ),
    pytest.param(
        lambda db: db.create_session("new", "cli", model_config={"deep": _nested(100_000)}),
        id="model-config-deep",
    ),
    pytest.param(lambda db: db.append_messages("s1", [{"role": "user", 1: 2}]), id="int-key"),
    pytest.param(
        lambda db: db.append_messages("s1", [{"role": "user", ("a", 1): 2, None: 3}]),
        id="odd-keys",
    ),
]


@pytest.mark.parametrize("call", OUT_OF_RANGE)
def test_numbers_and_nesting_past_the_limits_are_invalid_input(
    seeded: SessionDB, call: Call
) -> None:
    """Before, these escaped as OverflowError, RecursionError or TypeError."""
    error = assert_rejected(seeded, call)
    assert str(error)


def test_the_largest_limits_and_offsets_are_accepted(seeded: SessionDB) -> None:
    largest = 2**63 - 1
    assert len(seeded.search_messages("seedword", limit=largest)) == 3
    assert seeded.search_messages("seedword", limit=largest, offset=largest) == []
    assert seeded.search_messages("seedword", limit=largest, offset=2) != []
    assert len(seeded.list_sessions_rich(limit=largest, offset=0, include_children=True)) == 3
    assert seeded.list_sessions_rich(limit=largest, offset=largest) == []
    assert len(seeded.top_sessions_by_tokens(largest)) == 3


@pytest.mark.sqlite_only("a deeply nested JSON text written by another program")
def test_stored_json_nested_past_the_recursion_limit_reads_back_as_text(
    seeded: SessionDB, db_path: Path
) -> None:
    deep = "[" * 5000 + "]" * 5000
    with closing(sqlite3.connect(db_path)) as connection:
        connection.execute("UPDATE messages SET tool_calls = ? WHERE session_id = 's1'", (deep,))
        connection.commit()
    assert [m["tool_calls"] for m in seeded.get_messages("s1")] == [deep, deep]
    assert seeded.export_session("s1")["messages"][0]["tool_calls"] == deep


# ----------------------------------------------------------------------
# what a store is opened with: the target, the policy, a unit's patience
# ----------------------------------------------------------------------
OPENING = [
    pytest.param(lambda home: SessionDB(123), id="int-path"),
    pytest.param(lambda home: SessionDB(b"/tmp/state.db"), id="bytes-path"),
    pytest.param(lambda home: SessionDB(str(home / "a\x00b.db")), id="nul-in-path"),
    pytest.param(lambda home: SessionDB("postgresql://u@h:notaport/db"), id="bad-port"),
    pytest.param(lambda home: SessionDB("nosuchdialect://x/y"), id="unknown-backend"),
    pytest.param(lambda home: SessionDB(str(home / "s.db"), policy="fast"), id="policy-str"),
    pytest.param(lambda home: ContentionPolicy(patience_s="30"), id="patience-str"),
    pytest.param(lambda home: ContentionPolicy(patience_s=float("nan")), id="patience-nan"),
    pytest.param(lambda home: ContentionPolicy(jitter_max_s=float("inf")), id="jitter-inf"),
    pytest.param(lambda home: ContentionPolicy(busy_timeout_ms=1.5), id="busy-float"),
    pytest.param(lambda home: ContentionPolicy(checkpoint_every="50"), id="checkpoint-str"),
]


@pytest.mark.parametrize("call", OPENING)
def test_bad_opening_arguments_are_invalid_input_and_create_nothing(
    _isolated_home: Path, call: Callable[[Path], Any]
) -> None:
    _isolated_home.mkdir()
    with pytest.raises(InvalidInputError) as raised:
        call(_isolated_home)
    assert str(raised.value)
    assert list(_isolated_home.iterdir()) == [], "a refused open made a file"


@pytest.mark.parametrize("patience", ["5", -1, float("nan"), True])
def test_a_bad_patience_for_one_unit_is_invalid_input(seeded: SessionDB, patience: Any) -> None:
    def write(db: SessionDB) -> None:
        with db.store.write(patience_s=patience) as uow:
            uow.messages.append("s1", MessageIn("user", "never written"))

    error = assert_rejected(seeded, write)
    assert "patience_s" in str(error)


@pytest.mark.parametrize("patience", [1e308, 1e10, 3e6])
def test_a_patience_past_what_the_database_takes_waits_as_long_as_it_can(
    store_url: str, patience: float
) -> None:
    """Before, a patience whose milliseconds overflow failed every unit: on SQLite 1e308
    raised OverflowError (a CLI traceback for ``--patience 1e308``), on PostgreSQL anything
    past 2**31 - 1 ms (about 24.8 days) was refused as ``lock_timeout``."""
    with SessionDB(store_url, policy=ContentionPolicy(patience_s=patience)) as db:
        db.create_session("s1", "cli")
        with db.store.write(patience_s=patience) as uow:
            uow.messages.append("s1", MessageIn("user", "written"))
        assert db.message_count("s1") == 1


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://hermes@db.invalid/hermes?pool_mode=",
        "postgresql://hermes@db.invalid/hermes?sslmode=require&pool_mode=",
    ],
)
def test_an_option_with_no_value_in_a_url_is_named_not_dropped(url: str) -> None:
    """The URL parser drops ``name=`` silently: the option would look set and not be."""
    with pytest.raises(InvalidInputError, match="pool_mode= with no value"):
        SessionDB(url)
