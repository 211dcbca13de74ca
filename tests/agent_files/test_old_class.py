"""The old class's public behaviour, as its callers rely on it (``hermes_state.SessionDB``, v6).

Agent code, dashboards and web UIs were written against the old hand-written
class; where its observable behaviour differs from what the design document
shows, these tests hold ``SessionDB`` to the old behaviour (docs/guides/session-db.md: "Where
SessionDB follows the old code over the design document"). Every test runs on
SQLite and on PostgreSQL.
"""

from __future__ import annotations

import threading
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from hermes_store import InvalidInputError, SessionDB, SessionExistsError
from hermes_store.backends.sqlite.library import driver as sqlite3
from tests.store.test_facade import raw_message_count, raw_rows, raw_session
from tests.support.legacy_schema import build_legacy_db
from tests.support.upstream_schema import (
    UPSTREAM_VERSIONS,
    build_upstream_db,
    counter_mismatches,
    fts_problems,
    upstream_append_message,
    upstream_get_messages,
    upstream_open,
)


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


# ----------------------------------------------------------------------
# compression chains: get_compression_tip
# ----------------------------------------------------------------------
def _compressed_chain(db: SessionDB, clock: Any, *ids: str) -> None:
    """``ids[0]`` split by compression into ``ids[1]``, then ``ids[2]``, ... (the last is live)."""
    db.create_session(ids[0], "cli")
    for parent, child in zip(ids, ids[1:], strict=False):
        clock.advance(10)
        db.end_session(parent, "compression")
        db.create_session(child, "cli", parent_session_id=parent)


def test_compression_tip_follows_the_chain_to_its_newest_continuation(
    db: SessionDB, clock: Any
) -> None:
    _compressed_chain(db, clock, "root", "part2", "part3")
    assert db.get_compression_tip("root") == "part3"
    assert db.get_compression_tip("part2") == "part3"
    assert db.get_compression_tip("part3") == "part3"


def test_compression_tip_of_a_session_outside_any_chain_is_itself(
    db: SessionDB, clock: Any
) -> None:
    assert db.get_compression_tip("no-such-session") == "no-such-session"
    db.create_session("plain", "cli")
    assert db.get_compression_tip("plain") == "plain"
    db.create_session("ended", "cli")
    db.end_session("ended", "user_exit")
    clock.advance(10)
    db.create_session("branch", "cli", parent_session_id="ended")  # parent not compressed
    assert db.get_compression_tip("ended") == "ended"


def test_compression_tip_ignores_children_started_while_the_parent_was_live(
    db: SessionDB, clock: Any
) -> None:
    db.create_session("root", "cli")
    clock.advance(5)
    db.create_session("subagent", "cli", parent_session_id="root")  # a delegate, mid-session
    clock.advance(5)
    db.end_session("root", "compression")
    assert db.get_compression_tip("root") == "root"  # the subagent is no continuation
    clock.advance(5)
    db.create_session("continuation", "cli", parent_session_id="root")
    clock.advance(5)
    db.create_session("late-subagent", "cli", parent_session_id="continuation")
    assert db.get_compression_tip("root") == "continuation"


def test_compression_tip_takes_the_newest_of_several_continuations(
    db: SessionDB, clock: Any
) -> None:
    db.create_session("root", "cli")
    db.end_session("root", "compression")
    clock.advance(1)
    db.create_session("first-try", "cli", parent_session_id="root")
    clock.advance(1)
    db.create_session("second-try", "cli", parent_session_id="root")
    assert db.get_compression_tip("root") == "second-try"


def test_compression_tip_counts_a_child_started_at_the_parents_end(
    db: SessionDB, clock: Any
) -> None:
    db.create_session("root", "cli")
    db.end_session("root", "compression")
    ended_at = raw_session(db, "root")["ended_at"]
    clock.now = ended_at - 0.001  # the clock adds 0.001 per call: the child starts at ended_at
    db.create_session("same-instant", "cli", parent_session_id="root")
    assert raw_session(db, "same-instant")["started_at"] == ended_at
    assert db.get_compression_tip("root") == "same-instant"


def test_compression_tip_breaks_a_tie_on_started_at_by_the_larger_id(
    db: SessionDB, clock: Any
) -> None:
    db.create_session("root", "cli")
    db.end_session("root", "compression")
    clock.advance(1)
    instant = clock.now
    for session_id in ("tie-b", "tie-a"):
        clock.now = instant
        db.create_session(session_id, "cli", parent_session_id="root")
    assert db.get_compression_tip("root") == "tie-b"


def test_compression_tip_stops_after_100_steps_as_the_old_walk_did(
    db: SessionDB, clock: Any
) -> None:
    ids = [f"link-{i:03d}" for i in range(105)]
    _compressed_chain(db, clock, *ids)
    assert db.get_compression_tip(ids[0]) == ids[100]
    assert db.get_compression_tip(ids[10]) == ids[104]


def test_a_reopened_root_is_no_longer_part_of_a_chain(db: SessionDB, clock: Any) -> None:
    _compressed_chain(db, clock, "root", "next")
    db.reopen_session("root")
    assert db.get_compression_tip("root") == "root"


# ----------------------------------------------------------------------
# list_sessions_rich: one entry per conversation
# ----------------------------------------------------------------------
def _ids(rows: list[dict[str, Any]]) -> list[str]:
    return [row["id"] for row in rows]


def test_listing_hides_child_sessions_unless_asked_for(db: SessionDB, clock: Any) -> None:
    db.create_session("root", "cli")
    clock.advance(1)
    db.create_session("subagent", "cli", parent_session_id="root")
    clock.advance(1)
    db.create_session("other", "telegram")
    assert _ids(db.list_sessions_rich()) == ["other", "root"]
    assert _ids(db.list_sessions_rich(include_children=True)) == ["other", "subagent", "root"]


def _split_conversation(db: SessionDB, clock: Any) -> None:
    """ "root" compressed into "part2", then into "part3"; "subagent" ran inside "root"."""
    db.create_session("root", "cli", model="model-a", system_prompt="sp-1", user_id="u1")
    db.set_session_title("root", "Refactor")
    db.append_message("root", "user", "first question\nof the conversation")
    db.append_message("root", "assistant", "first answer", tool_calls=[{"id": "c1"}])
    db.update_token_counts("root", input_tokens=1000, output_tokens=100)
    clock.advance(1)
    db.create_session("subagent", "cli", parent_session_id="root")
    db.append_message("subagent", "user", "delegated task")
    previous = "root"
    for n in (2, 3):
        clock.advance(10)
        db.end_session(previous, "compression")
        child = f"part{n}"
        db.create_session(child, "cli", model=f"model-{n}", parent_session_id=previous)
        db.update_system_prompt(child, f"sp-{n}")
        db.set_session_title(child, f"Refactor #{n}")
        db.append_message(child, "user", f"continued question {n}")
        db.update_token_counts(child, input_tokens=n, output_tokens=n)
        previous = child
    db.append_message("part3", "assistant", "latest answer", tool_calls=[{"id": "a"}, {"id": "b"}])


def test_listing_shows_a_compressed_conversation_once_under_its_newest_continuation(
    db: SessionDB, clock: Any
) -> None:
    _split_conversation(db, clock)
    (entry,) = db.list_sessions_rich()
    root, tip = raw_session(db, "root"), raw_session(db, "part3")
    last = max(m["timestamp"] for m in db.get_messages("part3"))
    assert entry["_lineage_root_id"] == "root"
    # the tip's identity and activity ...
    assert entry["id"] == "part3"
    assert entry["title"] == "Refactor #3"
    assert entry["preview"] == "continued question 3"
    assert entry["last_active"] == last
    assert (entry["message_count"], entry["tool_call_count"]) == (2, 2)
    assert (entry["model"], entry["system_prompt"]) == ("model-3", "sp-3")
    assert (entry["ended_at"], entry["end_reason"]) == (None, None)
    # ... on the root's row: its start, place in the order, source, user and tokens
    assert entry["started_at"] == root["started_at"] < tip["started_at"]
    assert (entry["source"], entry["user_id"], entry["parent_session_id"]) == ("cli", "u1", None)
    assert (entry["input_tokens"], entry["output_tokens"]) == (1000, 100)


def test_listing_keeps_a_conversation_in_the_place_of_its_first_session(
    db: SessionDB, clock: Any
) -> None:
    db.create_session("old-root", "cli")
    clock.advance(10)
    db.create_session("middle", "cli")
    clock.advance(10)
    db.end_session("old-root", "compression")
    db.create_session("new-tip", "cli", parent_session_id="old-root")
    clock.advance(10)
    db.create_session("newest", "cli")
    rows = db.list_sessions_rich()
    assert _ids(rows) == ["newest", "middle", "new-tip"]
    assert [row.get("_lineage_root_id") for row in rows] == [None, None, "old-root"]


def test_listing_without_projection_returns_the_raw_root_rows(db: SessionDB, clock: Any) -> None:
    _split_conversation(db, clock)
    (entry,) = db.list_sessions_rich(project_compression_tips=False)
    assert entry["id"] == "root" and entry["title"] == "Refactor"
    assert entry["end_reason"] == "compression"
    assert entry["preview"] == "first question of the conversation"
    assert "_lineage_root_id" not in entry


def test_listing_with_children_shows_every_session_unprojected(db: SessionDB, clock: Any) -> None:
    _split_conversation(db, clock)
    rows = db.list_sessions_rich(include_children=True)
    assert _ids(rows) == ["part3", "part2", "subagent", "root"]
    assert all("_lineage_root_id" not in row for row in rows)
    assert rows[-1]["title"] == "Refactor"


def test_listing_projects_only_true_continuations(db: SessionDB, clock: Any) -> None:
    db.create_session("compressed-no-child", "cli")
    db.end_session("compressed-no-child", "compression")
    db.create_session("exited", "cli")
    db.end_session("exited", "user_exit")
    clock.advance(1)
    db.create_session("branch", "cli", parent_session_id="exited")
    rows = db.list_sessions_rich()
    assert _ids(rows) == ["exited", "compressed-no-child"]
    assert all("_lineage_root_id" not in row for row in rows)


def test_listing_pages_count_conversations(db: SessionDB, clock: Any) -> None:
    for n in range(5):
        clock.advance(10)
        db.create_session(f"conv{n}", "cli")
        db.end_session(f"conv{n}", "compression")
        db.create_session(f"conv{n}-tip", "cli", parent_session_id=f"conv{n}")
    assert _ids(db.list_sessions_rich(limit=2)) == ["conv4-tip", "conv3-tip"]
    assert _ids(db.list_sessions_rich(limit=2, offset=2)) == ["conv2-tip", "conv1-tip"]
    assert _ids(db.list_sessions_rich(limit=2, offset=4)) == ["conv0-tip"]
    assert db.list_sessions_rich(limit=0) == []


def test_listing_filters_on_the_source_of_the_first_session(db: SessionDB, clock: Any) -> None:
    db.create_session("cli-1", "cli")
    db.create_session("tg-1", "telegram")
    db.create_session("dc-1", "discord")
    db.end_session("dc-1", "compression")
    clock.advance(1)
    db.create_session("dc-tip", "cli", parent_session_id="dc-1")  # its own source is not asked
    assert _ids(db.list_sessions_rich(source="discord")) == ["dc-tip"]
    assert _ids(db.list_sessions_rich(exclude_sources=["telegram", "discord"])) == ["cli-1"]
    assert _ids(db.list_sessions_rich(exclude_sources=["cli"])) == ["dc-tip", "tg-1"]
    assert _ids(db.list_sessions_rich(exclude_sources=[])) == ["dc-tip", "tg-1", "cli-1"]
    assert _ids(db.list_sessions_rich("cli", ["telegram"], 5, 0)) == ["cli-1"]  # old order


# ----------------------------------------------------------------------
# the listing preview
# ----------------------------------------------------------------------
PREVIEWS = [
    pytest.param("short", "short", id="short"),
    pytest.param("line one\nline two", "line one line two", id="newline"),
    pytest.param("a\r\nb\rc", "a  b c", id="crlf-is-two-spaces"),
    pytest.param("tab\tstays", "tab\tstays", id="tab-kept"),
    pytest.param("  padded \n", "padded", id="stripped"),
    pytest.param("\n\n", "", id="only-newlines"),
    pytest.param("x" * 60, "x" * 60, id="60-no-dots"),
    pytest.param("x" * 61, "x" * 60 + "...", id="61-dots"),
    pytest.param("x" * 500, "x" * 60 + "...", id="long"),
    pytest.param("中" * 61, "中" * 60 + "...", id="characters-not-bytes"),
    pytest.param("x" * 59 + " " + "y" * 10, "x" * 59 + " ...", id="cut-at-a-space"),
    # the cut (63 characters) is taken before stripping, as in the old code:
    pytest.param("   " + "x" * 70, "x" * 60, id="leading-blanks-hide-the-rest"),
    pytest.param("x" * 60 + "   more", "x" * 60, id="blanks-after-60-hide-the-rest"),
    pytest.param("\n" + "x" * 61, "x" * 60 + "...", id="leading-newline"),
]


@pytest.mark.parametrize(("content", "preview"), PREVIEWS)
def test_listing_preview_is_the_old_one(db: SessionDB, content: str, preview: str) -> None:
    db.create_session("s", "cli")
    db.append_message("s", "user", content)
    (row,) = db.list_sessions_rich()
    assert row["preview"] == preview


def test_listing_preview_is_the_first_user_message_with_content(db: SessionDB) -> None:
    db.create_session("s", "cli")
    assert db.list_sessions_rich()[0]["preview"] == ""
    db.append_message("s", "system", "system text")
    db.append_message("s", "assistant", "assistant text")
    db.append_message("s", "user", None, tool_calls=[{"id": "c"}])
    assert db.list_sessions_rich()[0]["preview"] == ""
    db.append_message("s", "user", "the question")
    db.append_message("s", "user", "a later question")
    assert db.list_sessions_rich()[0]["preview"] == "the question"


def test_listing_last_active_is_the_newest_message_else_the_start(
    db: SessionDB, clock: Any
) -> None:
    db.create_session("s", "cli")
    started = raw_session(db, "s")["started_at"]
    assert db.list_sessions_rich()[0]["last_active"] == started
    clock.advance(30)
    db.append_message("s", "user", "hi")
    assert db.list_sessions_rich()[0]["last_active"] == db.get_messages("s")[0]["timestamp"]


# ----------------------------------------------------------------------
# speed: a page costs the same at 1,000 and at 50,000 sessions
# ----------------------------------------------------------------------
def _add_raw_sessions(db: SessionDB, start: int, count: int) -> None:
    """``count`` more sessions in one transaction, one a second.

    Every 50th (from the 45th) ends by compression and the next one
    continues it; every 10th (from the 9th) is a subagent of the one
    before. The rest are roots.
    """
    rows = []
    for n in range(start, start + count):
        compressed = n % 50 == 45
        parent = f"bulk-{n - 1:06d}" if n % 50 == 46 or n % 10 == 9 else None
        rows.append(
            (
                f"bulk-{n:06d}",
                "telegram" if n % 3 == 0 else "cli",
                float(n),
                parent,
                float(n) if compressed else None,
                "compression" if compressed else None,
            )
        )
    with db.store.write() as uow:
        uow.connection.connection.driver_connection.executemany(
            "INSERT INTO sessions (id, source, started_at, parent_session_id, ended_at, "
            "end_reason) VALUES (?, ?, ?, ?, ?, ?)",
            rows,
        )


def _vm_steps(db: SessionDB, call: Any) -> int:
    """SQLite virtual machine instructions (in hundreds) that ``call(uow)`` costs."""
    steps = 0

    def count() -> int:
        nonlocal steps
        steps += 1
        return 0

    with db.store.read() as uow:
        driver = uow.connection.connection.driver_connection
        driver.set_progress_handler(count, 100)
        try:
            call(uow)
        finally:
            driver.set_progress_handler(None, 100)
    return steps


PAGE_CALLS = {
    "roots": lambda uow: uow.sessions.listing(),
    "roots-excluding": lambda uow: uow.sessions.listing(exclude_sources=["telegram"]),
    "deep-page-children": lambda uow: uow.sessions.listing(include_children=True, offset=100),
    "unprojected": lambda uow: uow.sessions.listing(project_compression_tips=False),
    "tip": lambda uow: uow.sessions.compression_tip("bulk-000995"),
    "resolve": lambda uow: uow.sessions.resolve_id("bulk-0009"),
}


@pytest.mark.sqlite_only("counts SQLite's VM steps; PostgreSQL plans from its statistics")
@pytest.mark.parametrize("name", sorted(PAGE_CALLS))
def test_a_listing_page_costs_the_same_at_50000_sessions(db_path: Any, name: str) -> None:
    """SQLite plans without statistics: a plan that touched every session would show here.

    (Filtering on one ``source`` sorts that source's session ids, so its cost
    grows with them: about 20 ms for 16,000 of 50,000, against 100 ms for
    the old code's query; it is left out.)
    """
    with SessionDB(db_path) as db:
        _add_raw_sessions(db, 0, 1_000)
        small = _vm_steps(db, PAGE_CALLS[name])
        with db.store.read() as uow:  # the data has what the calls are about
            assert uow.sessions.compression_tip("bulk-000995") == "bulk-000996"
            assert sum("_lineage_root_id" in row for row in uow.sessions.listing()) == 1
        _add_raw_sessions(db, 1_000, 49_000)
        large = _vm_steps(db, PAGE_CALLS[name])
    assert large <= 2 * small + 5, (small, large)


# ----------------------------------------------------------------------
# update_token_counts: the route is filled in once, a missing estimate is 0
# ----------------------------------------------------------------------
ROUTE = ("billing_provider", "billing_base_url", "billing_mode")


@pytest.mark.parametrize("absolute", [False, True])
def test_usage_fills_in_the_billing_route_once_and_keeps_it(db: SessionDB, absolute: bool) -> None:
    db.create_session("routed", "cli")
    db.update_token_counts("routed", input_tokens=1, billing_mode="metered", absolute=absolute)
    db.update_token_counts(
        "routed",
        input_tokens=1,
        billing_provider="openrouter",
        billing_base_url="https://openrouter.ai/api/v1",
        billing_mode="subscription",
        absolute=absolute,
    )
    db.update_token_counts(
        "routed",
        input_tokens=1,
        billing_provider="anthropic",
        billing_base_url="https://api.anthropic.com",
        billing_mode="free",
        cost_status="final",
        absolute=absolute,
    )
    session = raw_session(db, "routed")
    assert tuple(session[k] for k in ROUTE) == (
        "openrouter",
        "https://openrouter.ai/api/v1",
        "metered",
    )
    assert session["cost_status"] == "final"  # cost labels follow the latest report


def test_usage_counts_a_missing_estimated_cost_as_zero(db: SessionDB) -> None:
    db.create_session("est", "cli")
    assert raw_session(db, "est")["estimated_cost_usd"] is None  # no usage yet
    db.update_token_counts("est", input_tokens=10)
    session = raw_session(db, "est")
    assert session["estimated_cost_usd"] == 0
    assert session["actual_cost_usd"] is None
    db.update_token_counts("est", estimated_cost_usd=0.25, actual_cost_usd=0.5)
    db.update_token_counts("est", input_tokens=1)
    assert raw_session(db, "est")["estimated_cost_usd"] == pytest.approx(0.25)
    db.update_token_counts("est", input_tokens=100, absolute=True)  # totals without a cost
    session = raw_session(db, "est")
    assert session["estimated_cost_usd"] == 0
    assert session["actual_cost_usd"] == pytest.approx(0.5)  # an actual cost only when given
    db.update_token_counts("est", input_tokens=100, estimated_cost_usd=0.75, absolute=True)
    assert raw_session(db, "est")["estimated_cost_usd"] == pytest.approx(0.75)


# ----------------------------------------------------------------------
# search_messages: an empty list of allowed sources allows none
# ----------------------------------------------------------------------
def test_search_with_an_empty_source_filter_finds_nothing(db: SessionDB) -> None:
    db.create_session("s", "cli")
    message_id = db.append_message("s", "user", "findable words")
    assert db.search_messages("findable", source_filter=[]) == []
    assert [h["id"] for h in db.search_messages("findable", exclude_sources=[])] == [message_id]
    assert [h["id"] for h in db.search_messages("findable", role_filter=[])] == [message_id]
    assert [h["id"] for h in db.search_messages("findable", source_filter=None)] == [message_id]


# ----------------------------------------------------------------------
# the same behaviour on files of the Hermes agent's own schema versions 7..25
# ----------------------------------------------------------------------
@pytest.mark.sqlite_only("files of the Hermes agent's own SQLite schema versions")
@pytest.mark.parametrize("version", UPSTREAM_VERSIONS)
def test_the_old_class_behaviour_on_a_file_the_agent_made(tmp_path: Path, version: int) -> None:
    path = build_upstream_db(tmp_path / "state.db", version)
    with closing(sqlite3.connect(path)) as raw:
        (schema_version,) = raw.execute("SELECT MAX(version) FROM schema_version").fetchone()
    with SessionDB(path) as db:
        root_before = raw_session(path, "up_root")
        assert db.create_session("up_root", "telegram", model="other") == "up_root"
        db.ensure_session("up_root", source="telegram")
        db.end_session("up_root", "user_exit")
        assert raw_session(path, "up_root") == root_before  # first write, first end win
        db.ensure_session("lost", model="m")
        assert db.get_session("lost")["source"] == "unknown"
        assert db.set_session_title("ghost", "Nobody") is False
        assert db.resolve_session_id("up_r") == "up_root"
        assert db.resolve_session_id("up_") is None
        db.end_session("up_other", "compression")
        db.create_session(
            "tip", "cli", system_prompt="the tip's prompt", parent_session_id="up_other"
        )
        db.append_message("tip", "user", "carried on\nafter compression")
        assert db.get_compression_tip("up_other") == "tip"
        listed = {row["id"]: row for row in db.list_sessions_rich()}
        assert set(listed) == {"tip", "up_root", "lost"}
        assert listed["tip"]["_lineage_root_id"] == "up_other"
        assert listed["tip"]["system_prompt"] == "the tip's prompt"  # v25: from system_prompts
        assert listed["tip"]["preview"] == "carried on after compression"
        assert listed["up_root"]["system_prompt"] == "You are Hermes."
    with closing(sqlite3.connect(path)) as raw:
        assert raw.execute("SELECT MAX(version) FROM schema_version").fetchone() == (
            schema_version,
        )
    assert fts_problems(path) == [] and counter_mismatches(path) == []
    # the agent's own code goes on writing the sessions the store made
    upstream_open(path, version)
    added = upstream_append_message(path, version, "lost", "user", "found again")
    assert [m["id"] for m in upstream_get_messages(path, version, "lost")] == [added]
    assert counter_mismatches(path) == []


@pytest.mark.sqlite_only("files the old sqlite3 code left at its schema versions 1..6")
@pytest.mark.parametrize("version", [1, 3, 6])
def test_the_listing_of_an_old_file_read_without_migrating(tmp_path: Path, version: int) -> None:
    """A read-only store on an old file: the chain root -> child -> grandchild is one entry."""
    path = build_legacy_db(tmp_path / "state.db", version)
    files = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with SessionDB(path, read_only=True) as db:
        rows = db.list_sessions_rich()
        assert [row["id"] for row in rows] == ["sess_grandchild", "sess_other"]
        assert rows[0]["_lineage_root_id"] == "sess_root"
        assert rows[0]["title"] == ("Fix Docker Build #3" if version >= 3 else None)
        assert rows[0]["started_at"] == 1_700_000_000.125  # the root's
        assert rows[0]["model"] == "openai/gpt-5"  # the tip's
        assert db.get_compression_tip("sess_child") == "sess_grandchild"
        assert db.resolve_session_id("sess_g") == "sess_grandchild"
        assert db.resolve_session_id("sess_") is None
        every = db.list_sessions_rich(include_children=True)
        assert len(every) == 4 and all("_lineage_root_id" not in row for row in every)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.name in files} == files


# ----------------------------------------------------------------------
# exports: a session's keys in its table's column order, as SELECT * gave them
# ----------------------------------------------------------------------
def _select_star_order(db: SessionDB) -> list[str]:
    with db.store.read() as uow:
        return list(uow.connection.exec_driver_sql("SELECT * FROM sessions").keys())


def test_an_exported_session_has_its_tables_column_order_then_messages(db: SessionDB) -> None:
    db.create_session("s", "cli", model="m")
    db.append_message("s", "user", "hello")
    order = [*_select_star_order(db), "messages"]
    assert list(db.export_all()[0]) == order
    assert list(db.export_session("s") or {}) == order
    assert order.index("title") < order.index("cache_read_tokens"), "title is not appended last"


@pytest.mark.sqlite_only("files the old sqlite3 code made and migrated")
@pytest.mark.parametrize("created_at", [1, 6])
def test_an_old_files_export_matches_the_old_class_key_for_key(
    tmp_path: Path, created_at: int
) -> None:
    """Columns the old code added with ALTER TABLE sit where that put them; diffs stay empty."""
    path = build_legacy_db(tmp_path / "state.db", 6, created_at=created_at)
    with closing(sqlite3.connect(path)) as raw:
        raw.row_factory = sqlite3.Row
        old = [
            {
                **dict(session),
                "messages": [
                    dict(m)
                    for m in raw.execute(
                        "SELECT * FROM messages WHERE session_id = ? ORDER BY timestamp, id",
                        (session["id"],),
                    )
                ],
            }
            for session in raw.execute("SELECT * FROM sessions ORDER BY started_at DESC")
        ]
    with SessionDB(path) as db:
        exported = db.export_all()
    # Opening migrated the file: revision 0016 appended the agent's flags, which an export
    # (the agent's SELECT * as well) now carries after the old columns, both 0 here.
    flags = {"archived": 0, "pinned": 0}
    assert [{k: s[k] for k in flags} for s in exported] == [flags] * len(old)
    kept = [[key for key in session if key not in flags] for session in exported]
    assert kept == [list(session) for session in old]
