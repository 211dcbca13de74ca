"""state.db files of the Hermes agent's own schema versions 7..25, shared both ways.

Files are built by ``tests/support/upstream_schema.py`` exactly as the agent's code
at each version leaves them (checked against the real code outside the
repository), and the agent's open, writes and search are replayed by the
same module. Each test runs the store and the agent's code on one real file,
in turn, and checks what either side must find: every message of both,
exact counters, each side's search finding the other side's messages (words
and Chinese), the file's FTS indexes whole (``integrity-check`` with
``rank = 1``), its ``schema_version`` never lowered and nothing of ours
(no Alembic table, no revision) written into it.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from hermes_store import (
    ReadOnlyStoreError,
    SchemaError,
    SessionBusyError,
    SessionDB,
    Store,
)
from hermes_store.backends.sqlite.library import driver as sqlite3
from hermes_store.schema.state import HEAD_REVISION, Ladder
from tests.support.upstream_schema import (
    CJK_STALE_KEY,
    CJK_TRIGGER_NAMES,
    SAMPLE_SEARCHES,
    UPSTREAM_VERSIONS,
    build_upstream_db,
    counter_mismatches,
    fts_problems,
    upstream_append_message,
    upstream_create_session,
    upstream_get_messages,
    upstream_open,
    upstream_search,
)

pytestmark = pytest.mark.sqlite_only("files of the Hermes agent's own SQLite schema versions")

OUR_WORDS = "zeppelin hangar inspection on tuesday"
OUR_CHINESE = "我们讨论了服务端的部署计划"  # "服务端" is also in the agent's sample


def _raw(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path)


def _state(path: Path) -> tuple[int, bool]:
    """(schema_version, whether an alembic_version table exists)."""
    with _raw(path) as raw:
        (version,) = raw.execute("SELECT MAX(version) FROM schema_version").fetchone()
        has_alembic = bool(
            raw.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'alembic_version'"
            ).fetchone()
        )
    return int(version), has_alembic


def _message_ids(path: Path, session_id: str) -> list[int]:
    with _raw(path) as raw:
        return [
            row[0]
            for row in raw.execute(
                "SELECT id FROM messages WHERE session_id = ? ORDER BY id", (session_id,)
            )
        ]


def _assert_sound(path: Path) -> None:
    assert fts_problems(path) == []
    assert counter_mismatches(path) == []


def _our_turn(db: SessionDB, session_id: str) -> list[int]:
    """What the store writes in these tests: a session with English and Chinese messages."""
    db.create_session(session_id, "cli", model="m1", system_prompt="You are the store.")
    first = db.append_message(session_id, "user", OUR_WORDS)
    rest = db.append_messages(
        session_id,
        [
            {"role": "assistant", "content": OUR_CHINESE, "finish_reason": "stop"},
            {
                "role": "assistant",
                "tool_calls": [{"id": "c1", "function": {"name": "terminal", "arguments": "{}"}}],
            },
        ],
    )
    db.update_token_counts(session_id, input_tokens=10, output_tokens=5, estimated_cost_usd=0.5)
    return [first, *rest]


# ---------------------------------------------------------------------------
# a file the agent created, then the store
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("version", UPSTREAM_VERSIONS)
def test_the_store_reads_a_file_the_agent_made(tmp_path: Path, version: int) -> None:
    path = build_upstream_db(tmp_path / "state.db", version)
    before = _state(path)
    with SessionDB(path) as db:
        assert db.store.ladder is Ladder.AGENT
        root = db.get_session("up_root")
        assert root is not None
        assert root["system_prompt"] == "You are Hermes."  # v25 keeps it in system_prompts
        assert root["end_reason"] == "compression"
        assert (root["input_tokens"], root["output_tokens"]) == (1200, 340)
        messages = db.get_messages("up_root")
        assert [m["role"] for m in messages] == ["user", "assistant", "tool"]
        assert messages[1]["tool_calls"][0]["function"]["name"] == "terminal"
        for query, sessions in SAMPLE_SEARCHES.items():
            found = {hit["session_id"] for hit in db.search_messages(query)}
            assert found == sessions, query
        assert db.get_ancestors("up_child")[-1]["id"] == "up_root"
        listed = {row["id"] for row in db.list_sessions_rich(limit=10)}
        assert {"up_root", "up_child", "up_other"} <= listed | {"up_child"}
    assert _state(path) == before  # never migrated, no Alembic table
    _assert_sound(path)


@pytest.mark.parametrize("version", UPSTREAM_VERSIONS)
def test_the_store_writes_a_file_the_agent_made_and_the_agent_reads_it(
    tmp_path: Path, version: int
) -> None:
    path = build_upstream_db(tmp_path / "state.db", version)
    before = _state(path)
    with SessionDB(path) as db:
        ours = _our_turn(db, "ours")
        db.append_message("up_other", "assistant", "more marmalade, from the store")
        db.set_session_title("ours", "Zeppelin checks")
        db.end_session("ours", "user_exit")
        assert db.get_session("ours")["system_prompt"] == "You are the store."
        assert {h["session_id"] for h in db.search_messages("zeppelin")} == {"ours"}
        assert {h["session_id"] for h in db.search_messages("服务端")} == {"ours", "up_child"}
    assert _state(path) == before
    _assert_sound(path)

    # The agent, reading the same file, sees and finds what the store wrote.
    assert [m["id"] for m in upstream_get_messages(path, version, "ours")] == ours
    assert set(upstream_search(path, version, "zeppelin")) == {ours[0]}
    assert ours[1] in upstream_search(path, version, "服务端")
    # ... and keeps writing it, then the store reads the agent's new rows.
    upstream_open(path, version)
    added = upstream_append_message(path, version, "up_other", "user", "quokka sighting")
    with SessionDB(path) as db:
        # (the agent's replayed clock is older than ours: compare ids, not order)
        assert added in {m["id"] for m in db.get_messages("up_other")}
        assert [h["id"] for h in db.search_messages("quokka")] == [added]
        assert db.get_session("up_other")["message_count"] == 3
    assert _state(path) == before
    _assert_sound(path)


@pytest.mark.parametrize("version", [v for v in UPSTREAM_VERSIONS if v != 10])
def test_deletes_on_a_file_the_agent_made(tmp_path: Path, version: int) -> None:
    path = build_upstream_db(tmp_path / "state.db", version)
    with SessionDB(path) as db:
        _our_turn(db, "ours")
        db.clear_messages("up_other")
        assert db.delete_session("ours") is True
        assert db.delete_session("up_child") is True
        assert db.get_session("up_root")["message_count"] == 3
        assert db.search_messages("服务端") == []
    _assert_sound(path)
    if version == 25:  # the prompts of deleted sessions do not linger
        with _raw(path) as raw:
            prompts = [row[0] for row in raw.execute("SELECT prompt FROM system_prompts")]
        assert prompts == ["You are Hermes."]


def test_a_delete_the_agents_v10_triggers_cannot_run_is_refused_up_front(tmp_path: Path) -> None:
    """v10's inline indexes reject the 'delete' command its own triggers send."""
    path = build_upstream_db(tmp_path / "state.db", 10)
    with _raw(path) as raw:
        before = raw.execute("SELECT COUNT(*) FROM messages").fetchone()
    with SessionDB(path) as db:
        for call in (
            lambda: db.delete_session("up_root"),
            lambda: db.clear_messages("up_root"),
        ):
            with pytest.raises(SchemaError, match="version 10.*11 or later.*Nothing was deleted"):
                call()
        db.create_session("empty", "cli")
        assert db.delete_session("empty") is True  # no message, no trigger: fine
    with _raw(path) as raw:
        assert raw.execute("SELECT COUNT(*) FROM messages").fetchone() == before
    upstream_open(path, 11)  # the agent's v11 rebuilds the indexes ...
    with SessionDB(path) as db:
        assert db.delete_session("up_root") is True  # ... and deletes work again
    _assert_sound(path)


# ---------------------------------------------------------------------------
# a file the store made, then the agent, then the store again
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("version", UPSTREAM_VERSIONS)
def test_a_store_file_survives_the_agents_code_both_ways(tmp_path: Path, version: int) -> None:
    path = tmp_path / "state.db"
    with SessionDB(path) as db:
        ours = _our_turn(db, "ours")
    assert _state(path) == (6, True)

    upstream_open(path, version)  # the agent's own steps run on the file
    upstream_create_session(path, version, "theirs", "telegram", system_prompt="Agent prompt")
    theirs = upstream_append_message(path, version, "theirs", "user", "platypus 服务端 notes")
    assert [m["id"] for m in upstream_get_messages(path, version, "ours")] == ours
    assert set(upstream_search(path, version, "zeppelin")) == {ours[0]}
    _assert_sound(path)
    after_agent = _state(path)
    assert after_agent == (version, True)

    with SessionDB(path) as db:
        assert db.store.ladder is Ladder.AGENT
        assert [m["id"] for m in db.get_messages("ours")] == ours
        assert db.get_session("theirs")["system_prompt"] == "Agent prompt"
        assert [h["id"] for h in db.search_messages("platypus")] == [theirs]
        assert {h["id"] for h in db.search_messages("服务端")} == {ours[1], theirs}
        later = db.append_message("theirs", "assistant", "wombat reply")
    assert _state(path) == after_agent  # not migrated back, not lowered

    upstream_open(path, version)
    assert later in upstream_search(path, version, "wombat")
    assert [m["id"] for m in upstream_get_messages(path, version, "theirs")] == [theirs, later]
    _assert_sound(path)


def test_a_file_the_store_stamped_7_is_mended_for_the_agents_v8(tmp_path: Path) -> None:
    """An older hermes_store wrote schema_version 7; the agent's v8 then skipped its step 7."""
    from tests.support.upstream_schema import build_store_db

    path = build_store_db(tmp_path / "state.db", schema_version=7, alembic_revision="0007")
    upstream_open(path, 8)  # takes the 7 as its own: reasoning_content never added
    with _raw(path) as raw:
        columns = {row[1] for row in raw.execute("PRAGMA table_info(messages)")}
    assert "reasoning_content" not in columns
    with pytest.raises(sqlite3.OperationalError, match="reasoning_content"):
        upstream_append_message(path, 8, "sess_root", "user", "fails before the mend")

    SessionDB(path).close()  # the store adds the column the agent's code expects

    assert _state(path) == (8, True)
    added = upstream_append_message(path, 8, "sess_root", "user", "works after the mend")
    with SessionDB(path) as db:
        assert db.get_messages("sess_root")[-1]["id"] == added
    _assert_sound(path)


def test_a_file_the_store_stamped_7_goes_back_to_6_before_the_agent_sees_it(
    tmp_path: Path,
) -> None:
    from tests.support.upstream_schema import build_store_db

    path = build_store_db(tmp_path / "state.db", schema_version=7, alembic_revision="0007")
    SessionDB(path).close()
    with _raw(path) as raw:
        assert raw.execute("SELECT version_num FROM alembic_version").fetchall() == [
            (HEAD_REVISION,)
        ]
    assert _state(path) == (6, True)
    upstream_open(path, 7)  # now runs its own step 7
    upstream_append_message(path, 7, "sess_root", "assistant", "with reasoning_content")
    assert _state(path) == (7, True)
    _assert_sound(path)


# ---------------------------------------------------------------------------
# the agent's v25 specifics
# ---------------------------------------------------------------------------
def test_cjk_index_this_process_cannot_load_degrades_as_the_agent_does(tmp_path: Path) -> None:
    """A cjk_unicode61 index made on another host: its triggers would fail every write here."""
    path = build_upstream_db(tmp_path / "state.db", 25, seed=False, cjk_index=True)
    with SessionDB(path, read_only=True) as reader:
        assert reader.store.layout.cjk is not None and not reader.store.layout.cjk.usable
    with SessionDB(path) as db:  # opening changes nothing yet
        with _raw(path) as raw:
            triggers = {
                row[0] for row in raw.execute("SELECT name FROM sqlite_master WHERE type='trigger'")
            }
        assert set(CJK_TRIGGER_NAMES) <= triggers
        ours = _our_turn(db, "ours")  # the first write drops them, stale mark first
        assert [m["id"] for m in db.get_messages("ours")] == ours
        assert {h["id"] for h in db.search_messages("服务端")} == {ours[1]}
    with _raw(path) as raw:
        triggers = {
            row[0] for row in raw.execute("SELECT name FROM sqlite_master WHERE type='trigger'")
        }
        stale = raw.execute("SELECT value FROM state_meta WHERE key = ?", (CJK_STALE_KEY,))
        assert stale.fetchall() == [("1",)]
    assert not set(CJK_TRIGGER_NAMES) & triggers
    _assert_sound(path)


def test_a_session_under_the_agents_compression_lock_takes_no_append(tmp_path: Path) -> None:
    import time

    path = build_upstream_db(tmp_path / "state.db", 25)
    with _raw(path) as raw:
        raw.execute(
            "INSERT INTO compression_locks (session_id, holder, acquired_at, expires_at) "
            "VALUES ('up_other', 'pid=4242', ?, ?)",
            (time.time(), time.time() + 300),
        )
    with SessionDB(path) as db:
        count = db.get_session("up_other")["message_count"]
        with pytest.raises(SessionBusyError, match="up_other.*pid=4242"):
            db.append_message("up_other", "user", "lost in the rewrite")
        with pytest.raises(SessionBusyError):
            db.append_messages("up_other", [{"role": "user", "content": "a"}] * 2)
        assert db.get_session("up_other")["message_count"] == count
        db.append_message("up_child", "user", "another session is fine")
    _assert_sound(path)


def test_v25_live_rows_only_as_the_agent_shows_them(tmp_path: Path) -> None:
    """Rewound rows (active = 0) are not part of the conversation, nor found by search."""
    path = build_upstream_db(tmp_path / "state.db", 25)
    with _raw(path) as raw:
        raw.execute("UPDATE messages SET active = 0 WHERE session_id = 'up_other'")
    with SessionDB(path) as db:
        assert db.get_messages("up_other") == []
        assert db.search_messages("marmalade") == []
        added = db.append_message("up_other", "user", "marmalade again")
        assert [m["id"] for m in db.get_messages("up_other")] == [added]
    with _raw(path) as raw:
        assert raw.execute("SELECT active FROM messages WHERE id = ?", (added,)).fetchone() == (1,)


# ---------------------------------------------------------------------------
# reading without writing
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("version", UPSTREAM_VERSIONS)
def test_read_only_store_on_an_agent_file(tmp_path: Path, version: int) -> None:
    path = build_upstream_db(tmp_path / "state.db", version)
    files = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with SessionDB(path, read_only=True) as db:
        assert {h["session_id"] for h in db.search_messages("docker")} == {"up_root"}
        assert len(db.get_messages("up_root")) == 3
        with pytest.raises(ReadOnlyStoreError):
            db.append_message("up_root", "user", "refused")
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.name in files} == files


def _read_everything(store: Store) -> dict[str, Any]:
    db = SessionDB(store=store)
    return {
        "sessions": db.list_sessions_rich(limit=50),
        "messages": {s["id"]: db.get_messages(s["id"]) for s in db.search_sessions(limit=50)},
    }


# ---------------------------------------------------------------------------
# copy and import out of the agent's files
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("version", UPSTREAM_VERSIONS)
def test_copy_from_an_agent_file_keeps_every_session_and_message(
    tmp_path: Path, version: int
) -> None:
    from hermes_store.tools.copy import copy_store

    source = build_upstream_db(tmp_path / "agent.db", version)
    with SessionDB(source) as db:
        _our_turn(db, "ours")
    before = _read_everything(Store(source, read_only=True))
    target = tmp_path / "copy.db"

    report = copy_store(source, target)

    assert (report.sessions_total, report.messages_total) == (4, 9)
    assert (report.sessions_copied, report.messages_copied) == (4, 9)
    assert _read_everything(Store(target)) == before
    with SessionDB(target) as copied:
        assert copied.get_session("up_child")["system_prompt"] == "You are Hermes."
        assert {h["session_id"] for h in copied.search_messages("服务端")} == {"ours", "up_child"}
    _assert_sound(target)
    assert _state(source)[0] == version  # the source was only read


def test_copy_from_v25_leaves_the_agents_inactive_rows_behind_and_says_so(tmp_path: Path) -> None:
    from hermes_store.tools.copy import copy_store

    source = build_upstream_db(tmp_path / "agent.db", 25)
    with _raw(source) as raw:
        raw.execute("UPDATE messages SET active = 0 WHERE session_id = 'up_other'")
        raw.execute("UPDATE sessions SET message_count = 0 WHERE id = 'up_other'")
    report = copy_store(source, tmp_path / "copy.db")
    assert (report.messages_total, report.messages_copied, report.inactive_left) == (5, 5, 1)
    with SessionDB(tmp_path / "copy.db") as copied:
        assert copied.get_messages("up_other") == []


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[object, str, str]:
    """``hermes-store ARGS`` run in this process: exit status, stdout, stderr."""
    from hermes_store.cli import main

    try:
        main(list(args))
        code: object = 0
    except SystemExit as done:
        code = done.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_cli_copy_from_an_agent_file_into_a_new_state_db(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = build_upstream_db(tmp_path / "agent.db", 25)
    target = tmp_path / "new.db"
    code, out, err = _cli(capsys, "copy", "--from", str(source), "--to", str(target))
    assert code == 0, out + err
    with SessionDB(target) as copied:
        assert copied.session_count() == 3
        assert copied.message_count() == 6


@pytest.mark.parametrize("version", UPSTREAM_VERSIONS)
def test_cli_reads_an_agent_file_and_upgrade_leaves_it_alone(
    tmp_path: Path, version: int, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    path = build_upstream_db(tmp_path / "state.db", version)
    before = _state(path)
    code, out, err = _cli(capsys, "current", "--db", str(path), "--json")
    assert code == 0, out + err
    assert json.loads(out)["ladder"] == "agent"
    assert json.loads(out)["schema_version"] == version
    code, out, err = _cli(capsys, "upgrade", "--db", str(path))
    assert code == 0 and "never migrates it" in out
    code, out, err = _cli(capsys, "search", "服务端", "--db", str(path), "--json")
    assert code == 0, out + err
    assert {hit["session_id"] for hit in json.loads(out)} == {"up_child"}
    assert _state(path) == before


# ---------------------------------------------------------------------------
# check and repair in the agent's layouts
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("version", UPSTREAM_VERSIONS)
def test_check_of_a_sound_agent_file_finds_nothing_and_changes_nothing(
    tmp_path: Path, version: int
) -> None:
    from hermes_store.tools.check import check

    path = build_upstream_db(tmp_path / "state.db", version)
    with Store(path) as store:
        report = check(store)
    assert report.ok, report
    assert report.stale_fts == []
    assert _state(path) == (version, False)


def test_an_agent_v25_update_of_our_indexes_is_found_stale_and_repaired(tmp_path: Path) -> None:
    """v23+ replaces our AFTER UPDATE triggers with inline-shaped ones; an update by the
    agent's code then leaves our external-content indexes stale, and check mends them."""
    from hermes_store.tools.check import check

    path = tmp_path / "state.db"
    with SessionDB(path) as db:
        ours = _our_turn(db, "ours")
    upstream_open(path, 25)
    with _raw(path) as raw:  # what an update of a message's text by the agent's code does
        raw.execute("UPDATE messages SET content = 'rewritten by the agent' WHERE id = ?", ours[:1])
    assert fts_problems(path)  # both indexes now disagree with messages

    with Store(path) as store:
        found = check(store)
        assert not found.ok and set(found.stale_fts) == {"messages_fts", "messages_fts_trigram"}
        repaired = check(store, repair=True)
        assert repaired.ok and repaired.rebuilt_fts
    _assert_sound(path)
    with SessionDB(path) as db:
        assert [h["id"] for h in db.search_messages("rewritten")] == [ours[0]]
        assert db.search_messages("zeppelin") == []
    assert ours[0] in upstream_search(path, 25, "rewritten")


def test_repairing_a_gated_v25_index_clears_the_agents_rebuild_markers(tmp_path: Path) -> None:
    from hermes_store.tools.check import check

    path = build_upstream_db(tmp_path / "state.db", 25)
    with _raw(path) as raw:
        raw.execute("INSERT INTO messages_fts_trigram(messages_fts_trigram) VALUES ('delete-all')")
        raw.execute(
            "INSERT INTO state_meta (key, value) VALUES ('fts_rebuild_high_water', '0'), "
            "('fts_rebuild_progress', '0')"
        )
    with Store(path) as store:
        assert check(store).stale_fts == ["messages_fts_trigram"]
        assert check(store, repair=True).ok
    with _raw(path) as raw:
        keys = raw.execute("SELECT key FROM state_meta WHERE key LIKE 'fts_rebuild%'").fetchall()
    assert keys == []  # a full rebuild covers every row: the agent's backfill must not add more
    _assert_sound(path)
    assert upstream_search(path, 25, "服务端")


def test_check_names_a_cjk_index_it_cannot_load_instead_of_failing(tmp_path: Path) -> None:
    from hermes_store.tools.check import check

    path = build_upstream_db(tmp_path / "state.db", 25, seed=False, cjk_index=True)
    with Store(path) as store:
        report = check(store)
    assert report.ok
    assert "cjk_unicode61" in report.unchecked_fts["messages_fts_cjk"]


@pytest.mark.parametrize("version", UPSTREAM_VERSIONS)
def test_shared_commits_combine_appends_on_a_file_the_agent_made(
    tmp_path: Path, version: int
) -> None:
    """Concurrent appends written in one multi-row INSERT follow the agent's layout too."""
    path = build_upstream_db(tmp_path / "state.db", version)
    before = _state(path)
    with SessionDB(path, shared_commits=True) as db:
        db.create_session("ours", "cli")
        shared = db.store.shared
        assert shared is not None
        calls_before, groups_before = shared.calls, shared.groups

        def write(n: int) -> None:
            for k in range(5):
                target = "ours" if n % 2 else "up_other"
                db.append_message(target, "user", f"zeppelin {n}:{k} 服务端", tool_calls=[{"n": n}])

        # Another program holds the write lock while the writers start, so their
        # appends queue behind one leader and share its transaction: the test does
        # not depend on how fast an append is.
        blocker = sqlite3.connect(path, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")
        threads = [threading.Thread(target=write, args=(n,)) for n in range(6)]
        try:
            for thread in threads:
                thread.start()
            # Until the other five are queued behind the waiting leader: a fixed pause
            # could end before a loaded machine ran them, and each then led its own.
            deadline = time.monotonic() + 60
            while shared.queued < 5:
                assert time.monotonic() < deadline, "the writers never queued"
                time.sleep(0.01)
        finally:
            blocker.execute("COMMIT")
            blocker.close()
        for thread in threads:
            thread.join(60)
        assert shared.calls - calls_before == 30
        assert shared.groups - groups_before < 30  # some of them shared a transaction
        assert len({h["id"] for h in db.search_messages("zeppelin", limit=50)}) == 30
    assert _state(path) == before
    _assert_sound(path)
    ours = set(_message_ids(path, "ours"))
    assert {m["id"] for m in upstream_get_messages(path, version, "ours")} == ours
    assert len(ours) == 15


# ---------------------------------------------------------------------------
# archived and pinned (issue #30): the agent's own columns, both ways
# ---------------------------------------------------------------------------
def _flags(path: Path, session_id: str) -> tuple[int, int]:
    """What the agent's code reads of a session's flags: its own columns."""
    with _raw(path) as raw:
        row = raw.execute(
            "SELECT archived, pinned FROM sessions WHERE id = ?", (session_id,)
        ).fetchone()
    return int(row[0]), int(row[1])


def test_archive_and_pin_on_a_v25_file_are_the_agents_flags_both_ways(tmp_path: Path) -> None:
    path = build_upstream_db(tmp_path / "state.db", 25)
    before = _state(path)
    with SessionDB(path) as db:
        # up_child started while up_root was live (a subagent); up_next continues up_root
        db.create_session("up_next", "cli", parent_session_id="up_root")
        db.set_session_archived("up_other", True)
        db.set_session_pinned("up_next", True)  # a compression continuation: its root too
        assert [row["id"] for row in db.list_sessions_rich()] == ["up_next"]
    assert _flags(path, "up_other") == (1, 0)
    assert _flags(path, "up_root") == (0, 1) and _flags(path, "up_next") == (0, 1)
    assert _flags(path, "up_child") == (0, 0)

    with _raw(path) as raw:  # the agent archives the conversation and restores the other
        raw.execute("UPDATE sessions SET archived = 0 WHERE id = 'up_other'")
        raw.execute("UPDATE sessions SET archived = 1 WHERE id IN ('up_root', 'up_next')")
    with SessionDB(path) as db:
        assert [row["id"] for row in db.list_sessions_rich()] == ["up_other"]
        assert db.session_count() == 2 and db.session_count(include_archived=True) == 4
        assert "up_next" in {row["id"] for row in db.list_sessions_rich(include_archived=True)}
        assert db.prune_sessions(older_than_days=0) == 0  # the ended root is pinned
    assert _state(path) == before
    _assert_sound(path)


@pytest.mark.parametrize("version", [7, 11])
def test_older_agent_files_have_no_flags_to_set(tmp_path: Path, version: int) -> None:
    path = build_upstream_db(tmp_path / "state.db", version)
    before = _state(path)
    with SessionDB(path) as db:
        with pytest.raises(SchemaError, match=r"archived, pinned .*schema version"):
            db.set_session_archived("up_other", True)
        with pytest.raises(SchemaError, match="pinned"):
            db.set_session_pinned("up_other", True)
        with pytest.raises(SchemaError, match="archived"):
            db.archive_stale_sessions(0)
        # reads treat every session as neither archived nor pinned
        assert db.session_count() == 3 and db.session_count_ge(3)
        listed = {row["id"] for row in db.list_sessions_rich(include_pinned=True)}
        assert listed == {row["id"] for row in db.list_sessions_rich(include_archived=True)}
        assert [s["id"] for s in db.search_sessions_by_id("up_oth")] == ["up_other"]
        first = db.get_messages("up_root")[0]["id"]
        assert [m["id"] for m in db.get_messages_around(first, before=1, after=1)] == [
            m["id"] for m in db.get_messages("up_root", limit=2)
        ]
        db.set_meta("shared_mark", "1")  # the agent's state_meta is there from v7 on
        assert db.get_meta("shared_mark") == "1"
    assert _state(path) == before
    _assert_sound(path)


def test_flags_and_meta_our_store_wrote_survive_the_agents_v25_open(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with SessionDB(path) as db:
        db.create_session("kept", "cli")
        db.create_session("hidden", "cli")
        db.set_session_pinned("kept", True)
        db.set_session_archived("hidden", True)
        db.set_meta("last_auto_prune", "1796000000.0")
    upstream_open(path, 25)  # the agent's open keeps our columns: they are its own
    assert _flags(path, "kept") == (0, 1) and _flags(path, "hidden") == (1, 0)
    with _raw(path) as raw:
        (mark,) = raw.execute(
            "SELECT value FROM state_meta WHERE key = 'last_auto_prune'"
        ).fetchone()
    assert mark == "1796000000.0"
    with SessionDB(path) as db:
        assert db.store.ladder is Ladder.AGENT
        assert [row["id"] for row in db.list_sessions_rich()] == ["kept"]
        assert db.maybe_auto_prune_and_vacuum(min_interval_hours=24 * 365 * 100)["skipped"]
    _assert_sound(path)


def test_a_delete_of_many_that_fails_midway_leaves_everything_as_it_was(tmp_path: Path) -> None:
    """v10's triggers refuse the second delete: the first, already done, is rolled back."""
    path = build_upstream_db(tmp_path / "state.db", 10)
    with SessionDB(path) as db:
        db.create_session("empty", "cli")  # deletable: no message, no trigger runs
        before = (db.session_count(), db.message_count(), _message_ids(path, "up_root"))
        with pytest.raises(SchemaError, match="Nothing was deleted"):
            db.delete_sessions(["empty", "up_root"])
        assert db.get_session("empty") is not None
        assert (db.session_count(), db.message_count(), _message_ids(path, "up_root")) == before
        assert db.count_empty_sessions(grace_seconds=0) == 1
    _assert_sound(path)


def test_an_upgrade_by_the_agent_under_a_running_store_is_seen_by_the_next_append(
    tmp_path: Path,
) -> None:
    """The agent moves a v11 file to v25 while the store holds it open between two appends.

    The second append must run on the v25 layout (the schema cookie read),
    not on what the first append's unit left for the next one on the
    connection: it is refused under the agent's compression lock, which
    only v25 has, and the row it writes is one of the agent's live rows.
    """
    path = build_upstream_db(tmp_path / "state.db", 11)
    with SessionDB(path) as db:
        db.create_session("s", "cli")
        first = db.append_message("s", "user", "before the upgrade")
        upstream_open(path, 25)  # another process: the agent's code at v25
        with _raw(path) as raw:
            raw.execute(
                "INSERT INTO compression_locks (session_id, holder, acquired_at, expires_at) "
                "VALUES ('s', 'pid=4242', ?, ?)",
                (time.time(), time.time() + 300),
            )
        with pytest.raises(SessionBusyError, match="pid=4242"):
            db.append_message("s", "user", "lost in the rewrite")
        assert db.get_session("s")["message_count"] == 1
        db.create_session("t", "cli")
        later = db.append_message("t", "assistant", "after the upgrade")
    assert [m["id"] for m in upstream_get_messages(path, 25, "s")] == [first]
    assert [m["id"] for m in upstream_get_messages(path, 25, "t")] == [later]
    with _raw(path) as raw:
        assert raw.execute("SELECT active FROM messages WHERE id = ?", (later,)).fetchone() == (1,)
    _assert_sound(path)


def test_a_lock_taken_between_two_appends_refuses_the_second(tmp_path: Path) -> None:
    """The guard runs on every append, not once per connection or per unit's repositories."""
    path = build_upstream_db(tmp_path / "state.db", 25)
    with SessionDB(path) as db:
        db.create_session("s", "cli")
        db.append_message("s", "user", "first")
        with _raw(path) as raw:
            raw.execute(
                "INSERT INTO compression_locks (session_id, holder, acquired_at, expires_at) "
                "VALUES ('s', 'pid=77', ?, ?)",
                (time.time(), time.time() + 300),
            )
        with pytest.raises(SessionBusyError, match="pid=77"):
            db.append_message("s", "user", "second")
        assert db.get_session("s")["message_count"] == 1
        assert [m["content"] for m in db.get_messages("s")] == ["first"]
