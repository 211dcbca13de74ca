"""The old class's public behaviour, as its callers rely on it (``hermes_state.SessionDB``, v6).

Agent code, dashboards and web UIs were written against the old hand-written
class; where its observable behaviour differs from what the design document
shows, these tests hold ``SessionDB`` to the old behaviour (README: "Where
SessionDB follows the old code over the design document"). Every test runs on
SQLite and on PostgreSQL.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from hermes_store import InvalidInputError, SessionDB, SessionExistsError

from .test_facade import raw_message_count, raw_rows, raw_session


# ----------------------------------------------------------------------
# create_session and ensure_session: the first write wins
# ----------------------------------------------------------------------
def test_create_session_on_an_existing_id_changes_nothing_and_returns_the_id(
    db: SessionDB,
) -> None:
    db.create_session(
        "dup", "cli", model="first", model_config={"t": 1}, system_prompt="original", user_id="u1"
    )
    db.append_message("dup", "user", "hello")
    before = raw_session(db, "dup")
    returned = db.create_session(
        "dup",
        "telegram",
        model="second",
        model_config={"t": 2},
        system_prompt="replaced",
        user_id="u2",
    )
    assert returned == "dup"
    assert raw_session(db, "dup") == before
    assert before["source"] == "cli" and before["model"] == "first"
    assert db.session_count() == 1
    assert raw_message_count(db, "dup") == 1


def test_create_session_on_an_existing_id_does_not_look_at_the_parent(db: SessionDB) -> None:
    """As ``INSERT OR IGNORE``: an ignored row is never checked against its foreign key."""
    db.create_session("child", "cli")
    assert db.create_session("child", "cli", parent_session_id="no-such-parent") == "child"
    assert raw_session(db, "child")["parent_session_id"] is None


def test_create_session_with_a_parent_naming_no_session_is_still_invalid_input(
    db: SessionDB,
) -> None:
    with pytest.raises(InvalidInputError, match="parent_session_id"):
        db.create_session("orphan", "cli", parent_session_id="no-such-parent")
    assert db.session_count() == 0


def test_session_exists_error_stays_importable_but_create_no_longer_raises_it() -> None:
    assert issubclass(SessionExistsError, InvalidInputError)


def test_two_writers_creating_one_id_both_succeed_and_one_row_is_kept(store_url: str) -> None:
    """The race the existence check cannot close on PostgreSQL: the unique index decides."""
    ids = [f"race-{i}" for i in range(20)]
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def create(source: str) -> None:
        try:
            with SessionDB(store_url) as db:
                barrier.wait()
                for session_id in ids:
                    assert db.create_session(session_id, source) == session_id
        except BaseException as error:  # reported below, not lost in the thread
            errors.append(error)

    threads = [threading.Thread(target=create, args=(s,)) for s in ("cli", "telegram")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    with SessionDB(store_url) as db:
        rows = raw_rows(db, "SELECT id, source FROM sessions ORDER BY id")
    assert sorted(row["id"] for row in rows) == sorted(ids)
    assert {row["source"] for row in rows} <= {"cli", "telegram"}


def test_ensure_session_creates_a_minimal_row_when_absent(db: SessionDB, clock: Any) -> None:
    assert db.ensure_session("lost") is None
    session = raw_session(db, "lost")
    assert session["source"] == "unknown"
    assert session["started_at"] == pytest.approx(clock.now)
    for field in ("model", "model_config", "system_prompt", "user_id", "parent_session_id"):
        assert session[field] is None, field
    assert (session["message_count"], session["tool_call_count"]) == (0, 0)
    db.ensure_session("with-model", source="telegram", model="m1")
    assert raw_session(db, "with-model")["source"] == "telegram"
    assert raw_session(db, "with-model")["model"] == "m1"


def test_ensure_session_keeps_an_existing_session_as_it_was(db: SessionDB) -> None:
    db.create_session("kept", "cli", model="original", system_prompt="sp")
    db.append_message("kept", "user", "hi")
    db.end_session("kept", "user_exit")
    before = raw_session(db, "kept")
    assert db.ensure_session("kept", source="telegram", model="other") is None
    assert raw_session(db, "kept") == before


# ----------------------------------------------------------------------
# end_session: the first end wins
# ----------------------------------------------------------------------
def test_end_session_on_an_ended_session_keeps_the_first_reason_and_time(
    db: SessionDB, clock: Any
) -> None:
    db.create_session("split", "cli")
    db.end_session("split", "compression")
    first = raw_session(db, "split")
    clock.advance(3600)
    db.end_session("split", "user_exit")  # a stale caller, e.g. after /resume
    db.end_session("split", None)
    assert raw_session(db, "split") == first
    assert first["end_reason"] == "compression"


def test_end_session_after_reopen_takes_the_new_reason_and_time(db: SessionDB, clock: Any) -> None:
    db.create_session("again", "cli")
    db.end_session("again", "compression")
    first_end = raw_session(db, "again")["ended_at"]
    db.reopen_session("again")
    clock.advance(60)
    db.end_session("again", "user_exit")
    session = raw_session(db, "again")
    assert session["end_reason"] == "user_exit"
    assert session["ended_at"] >= first_end + 60


# ----------------------------------------------------------------------
# resolve_session_id: exact id, else a unique prefix, else None
# ----------------------------------------------------------------------
def _sessions(db: SessionDB, *ids: str) -> None:
    for session_id in ids:
        db.create_session(session_id, "cli")


def test_resolve_session_id_prefers_the_exact_id_over_a_prefix(db: SessionDB) -> None:
    _sessions(db, "20260412_1530", "20260412_1530_b", "20260412_1530_c")
    assert db.resolve_session_id("20260412_1530") == "20260412_1530"
    assert db.resolve_session_id("20260412_1530_b") == "20260412_1530_b"


def test_resolve_session_id_takes_a_prefix_only_when_one_session_has_it(db: SessionDB) -> None:
    _sessions(db, "20260412_153012_a1b2c3", "20260412_160000_d4e5f6", "20260413_090000_aaaaaa")
    assert db.resolve_session_id("20260412_15") == "20260412_153012_a1b2c3"
    assert db.resolve_session_id("20260413") == "20260413_090000_aaaaaa"
    assert db.resolve_session_id("20260412") is None  # two sessions: ambiguous
    assert db.resolve_session_id("2026041") is None
    assert db.resolve_session_id("20260414") is None  # none
    assert db.resolve_session_id("20260412_153012_a1b2c3_") is None  # longer than any id


def test_resolve_session_id_treats_like_wildcards_and_backslash_literally(db: SessionDB) -> None:
    _sessions(db, "a%b", "a_b", "a\\b", "axb", "ayb")
    assert db.resolve_session_id("a%") == "a%b"
    assert db.resolve_session_id("a_") == "a_b"
    assert db.resolve_session_id("a\\") == "a\\b"
    assert db.resolve_session_id("a\\%") is None
    assert db.resolve_session_id("%") is None
    assert db.resolve_session_id("_") is None
    assert db.resolve_session_id("a") is None  # five sessions start with "a"


def test_resolve_session_id_is_case_sensitive_on_both_backends(db: SessionDB) -> None:
    """SQLite's LIKE (the old code's) folds ASCII case; ids are compared as typed here."""
    _sessions(db, "abc123")
    assert db.resolve_session_id("abc") == "abc123"
    assert db.resolve_session_id("ABC") is None
    assert db.resolve_session_id("ABC123") is None


def test_resolve_session_id_matches_whole_characters_beyond_ascii(db: SessionDB) -> None:
    _sessions(db, "会话-一", "会话-二", "会话x", "🚀launch")
    assert db.resolve_session_id("会话-一") == "会话-一"
    assert db.resolve_session_id("会话x") == "会话x"
    assert db.resolve_session_id("会话-") is None
    assert db.resolve_session_id("🚀") == "🚀launch"


def test_resolve_session_id_with_no_sessions_and_the_empty_prefix(db: SessionDB) -> None:
    assert db.resolve_session_id("anything") is None
    assert db.resolve_session_id("") is None
    _sessions(db, "only")
    assert db.resolve_session_id("") == "only"  # every id starts with "", as in the old code
    _sessions(db, "second")
    assert db.resolve_session_id("") is None


@pytest.mark.sqlite_only("PostgreSQL text cannot hold U+0000")
def test_resolve_session_id_compares_past_a_nul_in_the_id(db: SessionDB) -> None:
    _sessions(db, "id\x00tail")
    assert db.resolve_session_id("id") == "id\x00tail"
    assert db.resolve_session_id("id\x00t") == "id\x00tail"
    assert db.resolve_session_id("id\x00x") is None
    assert db.resolve_session_id("id\x00tail\x00") is None
