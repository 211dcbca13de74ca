"""Self-tests of tests/support/upstream_schema.py: files as upstream's store leaves them.

The fixtures must be right before any test of hermes_store can lean on them,
so these tests check three things, with nothing but the standard library:

* each file a fixture builds is sound: FTS5 ``integrity-check`` (``rank = 1``)
  on every index, ``PRAGMA integrity_check``, counters equal to the rows, and
  each version's search finds the sample messages, in words and in Chinese;
* the schema each scenario ends with is the one the REAL upstream code leaves.
  Upstream's code is never run here (none of it is in the repository); a
  harness outside it ran each scenario with the real ``hermes_state`` of
  every version and with these fixtures and compared the files object by
  object (sqlite_master with normalized SQL, ``table_info`` of every table,
  schema_version, state_meta, every row but times, every FTS index's terms).
  ``REAL_FINGERPRINTS`` are the digests of the real files' schema signatures;
* the facts the store side depends on, spelled out one by one: what each
  version's open does to a file that carries OUR objects, and upstream's own
  failure modes that hermes_store must expect (v10's deletes, v25 on v7..v9
  files, the cjk index without its tokenizer).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from hermes_store.backends.sqlite.library import driver as sqlite3
from tests.support import upstream_schema as up

# Digests of schema_signature() of the files the REAL upstream code produced
# (SQLite 3.40.1), per scenario. Seeded files share their fresh file's digest:
# the signature describes the schema, not the rows.
REAL_FINGERPRINTS = {
    "fresh7": "0b4255b7374b74e9",
    "fresh8": "867cf454a1cbab6d",
    "fresh9": "631deb845b861aa3",
    "fresh10": "6df253ab32ab952c",
    "fresh11": "92de555825246c41",
    "fresh25": "f2588746e154c9a5",
    "store7->v7": "bac3e9324d6914c9",
    "store7->v8": "e6cbe52f292cc4b1",
    "store7->v9": "2aed871530c89e94",
    "store7->v10": "cc29311563d33f58",
    "store7->v11": "3c277a598154d365",
    "store7->v25": "efaec1932e23a9ba",
    "store6->v7": "b6e3d75b55bc7541",
    "store6->v8": "135d0a6c2ecfdf81",
    "store6->v9": "b8e69acd0c46a416",
    "store6->v10": "cc29311563d33f58",
    "store6->v11": "3c277a598154d365",
    "store6->v25": "efaec1932e23a9ba",
    "up7->v8": "d3f19f01f87a35ec",
    "up7->v10": "be2fa979a6160523",
    "up8->v9": "bd0b72f58ba98dcd",
    "up9->v10": "b8da1cb35eb95464",
    "up9->v11": "92de555825246c41",
    "up10->v11": "92de555825246c41",
    "up7->v25": "8fdce9327ad4458a",
    "up10->v25": "1d397c1d413e08a2",
    "up11->v25": "df903ee8c128f04c",
    "up25->v7": "f2588746e154c9a5",
    "up25->v10": "f2588746e154c9a5",
    "up25->v11": "f2588746e154c9a5",
    "up11->v10": "92de555825246c41",
    "up10->v9": "6df253ab32ab952c",
    "store7->v10->v11->v25": "706fbce7a0eead15",
    "store6->v9->v25": "3f81c6b4ffea05d6",
    "cjk25->v25": "1b687e7ab0fa4ac2",
    "cjk25->v11": "4334f8657cb30968",
    "cjk25->v7": "4334f8657cb30968",
    "reopen25": "ef0999888035470c",
    "delegates9->v25": "639e679d7bcd2c15",
}

VERSIONS = up.UPSTREAM_VERSIONS


def _chain(start: Callable[[Path], None] | None, *opens: int) -> Callable[[Path], None]:
    def build(path: Path) -> None:
        if start is not None:
            start(path)
        for version in opens:
            up.upstream_open(path, version)

    return build


def _delegates_v9(path: Path) -> None:
    """A v9 file with a lone tool-using root and a live parent with a subagent."""
    up.build_upstream_db(path, 9)
    up.upstream_create_session(path, 9, "lone", "cli")
    up.upstream_append_message(path, 9, "lone", "tool", "ls output", tool_name="terminal")
    up.upstream_create_session(path, 9, "boss", "cli", model_config={"k": 1})
    up.upstream_create_session(path, 9, "helper", "tool", parent_session_id="boss")
    up.upstream_append_message(path, 9, "helper", "user", "subtask")


def _scenarios() -> dict[str, Callable[[Path], None]]:
    def store(schema_version: int) -> Callable[[Path], None]:
        return lambda path: up.build_store_db(path, schema_version=schema_version)

    def upstream(version: int) -> Callable[[Path], None]:
        return lambda path: up.build_upstream_db(path, version)

    def cjk(path: Path) -> None:
        up.build_upstream_db(path, 25, seed=False, cjk_index=True)

    scenarios: dict[str, Callable[[Path], None]] = {}
    for v in VERSIONS:
        scenarios[f"fresh{v}"] = _chain(None, v)
        scenarios[f"store7->v{v}"] = _chain(store(7), v)
        scenarios[f"store6->v{v}"] = _chain(store(6), v)
    for name in REAL_FINGERPRINTS:
        if name.startswith("up"):
            m, n = (int(part.strip("upv")) for part in name.split("->"))
            scenarios[name] = _chain(upstream(m), n, n)
    scenarios["store7->v10->v11->v25"] = _chain(store(7), 10, 11, 25)
    scenarios["store6->v9->v25"] = _chain(store(6), 9, 25)
    scenarios["cjk25->v25"] = _chain(cjk, 25)
    scenarios["cjk25->v11"] = _chain(cjk, 11)
    scenarios["cjk25->v7"] = _chain(cjk, 7)
    scenarios["reopen25"] = _chain(None, 25, 25)
    scenarios["delegates9->v25"] = _chain(_delegates_v9, 25)
    return scenarios


SCENARIOS = _scenarios()


def test_every_recorded_scenario_is_rebuilt() -> None:
    assert set(SCENARIOS) == set(REAL_FINGERPRINTS)


@pytest.mark.parametrize("name", sorted(REAL_FINGERPRINTS))
def test_schema_matches_the_real_upstream_code(tmp_path: Path, name: str) -> None:
    path = tmp_path / "state.db"
    SCENARIOS[name](path)
    assert up.fingerprint(up.schema_signature(path)) == REAL_FINGERPRINTS[name]


# ---------------------------------------------------------------------------
# Files created by upstream: sound, counted, searchable.
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_seeded_file_is_sound_and_counted(tmp_path: Path, version: int) -> None:
    path = up.build_upstream_db(tmp_path / "state.db", version)
    assert up.fts_problems(path) == []
    assert up.counter_mismatches(path) == []
    with sqlite3.connect(path) as connection:
        stored = connection.execute("SELECT version FROM schema_version").fetchall()
        tools = connection.execute(
            "SELECT tool_call_count FROM sessions WHERE id = 'up_root'"
        ).fetchone()[0]
        tokens = connection.execute(
            "SELECT input_tokens, output_tokens FROM sessions WHERE id = 'up_root'"
        ).fetchone()
    assert stored == [(version,)]
    assert tools == 1
    assert tokens == (1200, 340)


@pytest.mark.parametrize("version", VERSIONS)
def test_each_version_finds_the_sample_in_words_and_chinese(tmp_path: Path, version: int) -> None:
    path = up.build_upstream_db(tmp_path / "state.db", version)
    session_of = {
        m["id"]: sid for sid in ("up_root", "up_child", "up_other")
        for m in up.upstream_get_messages(path, version, sid)
    }  # fmt: skip
    for query, sessions in up.SAMPLE_SEARCHES.items():
        hits = up.upstream_search(path, version, query)
        assert {session_of[i] for i in hits} == sessions, query


@pytest.mark.parametrize("version", VERSIONS)
def test_get_messages_decodes_tool_calls(tmp_path: Path, version: int) -> None:
    path = up.build_upstream_db(tmp_path / "state.db", version)
    messages = up.upstream_get_messages(path, version, "up_root")
    assert [m["role"] for m in messages] == ["user", "assistant", "tool"]
    assert messages[1]["tool_calls"][0]["function"]["name"] == "terminal"


def test_v25_writes_prompts_by_hash_active_rows_and_model_usage(tmp_path: Path) -> None:
    path = up.build_upstream_db(tmp_path / "state.db", 25)
    digest = up.system_prompt_hash("You are Hermes.")
    with sqlite3.connect(path) as connection:
        sessions = connection.execute(
            "SELECT id, system_prompt, system_prompt_hash, api_call_count FROM sessions ORDER BY id"
        ).fetchall()
        prompts = connection.execute("SELECT hash, prompt FROM system_prompts").fetchall()
        actives = {r[0] for r in connection.execute("SELECT active FROM messages")}
        usage = connection.execute(
            "SELECT session_id, model, task, input_tokens, api_call_count "
            "FROM session_model_usage ORDER BY session_id"
        ).fetchall()
    assert sessions == [
        ("up_child", None, digest, 1),
        ("up_other", None, None, 0),
        ("up_root", None, digest, 2),
    ]
    assert prompts == [(digest, "You are Hermes.")]  # one row for two sessions
    assert actives == {1}
    assert usage == [
        ("up_child", "anthropic/claude-sonnet-4.6", "", 800, 1),
        ("up_root", "anthropic/claude-sonnet-4.6", "", 1200, 2),
    ]


def test_v25_refuses_appends_to_a_session_ended_by_compression(tmp_path: Path) -> None:
    path = up.build_upstream_db(tmp_path / "state.db", 25)
    with pytest.raises(up.CompressionClosedError):
        up.upstream_append_message(path, 25, "up_root", "user", "late")


def _columns(path: Path, table: str) -> list[str]:
    with sqlite3.connect(path) as connection:
        return [row[1] for row in connection.execute(f'PRAGMA table_info("{table}")')]


def _sql(path: Path, name: str) -> str | None:
    with sqlite3.connect(path) as connection:
        row = connection.execute("SELECT sql FROM sqlite_master WHERE name = ?", (name,)).fetchone()
    return row[0] if row else None


def test_columns_each_version_adds(tmp_path: Path) -> None:
    files = {v: up.build_upstream_db(tmp_path / f"{v}.db", v, seed=False) for v in VERSIONS}
    assert "reasoning_content" in _columns(files[7], "messages")
    assert _columns(files[7], "state_meta") == ["key", "value"]
    assert "api_call_count" not in _columns(files[7], "sessions")
    assert _columns(files[8], "sessions")[-1] == "api_call_count"
    assert _columns(files[9], "messages")[-1] == "codex_message_items"
    assert {"active", "compacted", "observed", "platform_message_id"} <= set(
        _columns(files[25], "messages")
    )
    assert {"system_prompt_hash", "archived", "pinned"} <= set(_columns(files[25], "sessions"))
    for table in ("system_prompts", "session_model_usage", "compression_locks", "gateway_routing"):
        assert _columns(files[25], table), table


@pytest.mark.parametrize(
    ("version", "base", "trigram"),
    [
        (7, "content=messages", None),
        (10, "fts5(content)", "tokenize='trigram'"),
        (11, "fts5(content)", "tokenize='trigram'"),
        (25, "content='messages'", "content='messages_fts_trigram_src'"),
    ],
)
def test_fts_layout_of_fresh_files(tmp_path: Path, version: int, base: str, trigram: str) -> None:
    path = up.build_upstream_db(tmp_path / "state.db", version, seed=False)
    assert base in up.normalize_sql(_sql(path, "messages_fts"))
    if trigram is None:
        assert _sql(path, "messages_fts_trigram") is None
    else:
        assert trigram in up.normalize_sql(_sql(path, "messages_fts_trigram"))


def test_v10_created_files_cannot_delete_messages(tmp_path: Path) -> None:
    """v10's delete triggers send the external-content 'delete' command to
    inline tables; SQLite refuses it, so every message DELETE fails. v25
    narrows the update triggers of such a file but keeps its delete triggers."""
    path = up.build_upstream_db(tmp_path / "state.db", 10)
    for version in (10, 25):
        up.upstream_open(path, version)
        with sqlite3.connect(path) as connection, pytest.raises(sqlite3.OperationalError):
            connection.execute("DELETE FROM messages WHERE id = 1")


def test_v11_open_repairs_a_v10_file(tmp_path: Path) -> None:
    path = up.build_upstream_db(tmp_path / "state.db", 10)
    up.upstream_open(path, 11)
    with sqlite3.connect(path) as connection:
        connection.execute("DELETE FROM messages WHERE session_id = 'up_other'")
    assert up.fts_problems(path) == []


def test_second_v25_open_stamps_the_fts_storage_version(tmp_path: Path) -> None:
    path = up.build_upstream_db(tmp_path / "state.db", 25, seed=False)
    assert up.schema_signature(path)["state_meta"] == {}
    up.upstream_open(path, 25)
    assert up.schema_signature(path)["state_meta"] == {"fts_storage_version": "1"}


@pytest.mark.parametrize("older", [7, 10, 11])
def test_older_versions_never_lower_a_v25_file(tmp_path: Path, older: int) -> None:
    path = up.build_upstream_db(tmp_path / "state.db", 25)
    before = up.schema_signature(path)
    up.upstream_open(path, older)
    assert up.schema_signature(path) == before
    new_id = up.upstream_append_message(path, older, "up_other", "user", "older docker note")
    assert new_id in up.upstream_search(path, 25, "docker")
    assert up.fts_problems(path) == []


def test_v25_on_a_v7_file_breaks_its_word_index(tmp_path: Path) -> None:
    """Upstream's own failure (the real code does the same): a v7..v9 file has
    three FTS triggers, so v25 'repairs' the legacy layout by refilling the
    external-content messages_fts with the joined text, which no longer
    matches messages.content, and creates an empty-then-filled inline trigram."""
    path = up.build_upstream_db(tmp_path / "state.db", 7)
    up.upstream_open(path, 25)
    assert [p.split(":")[0] for p in up.fts_problems(path)] == ["messages_fts"]
    assert "content=messages" in up.normalize_sql(_sql(path, "messages_fts"))
    assert "fts5(content,tokenize='trigram')" in up.normalize_sql(
        _sql(path, "messages_fts_trigram")
    )


def test_v25_tags_subagent_and_orphaned_rows(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    _delegates_v9(path)
    up.upstream_open(path, 25)
    with sqlite3.connect(path) as connection:
        configs = dict(connection.execute("SELECT id, model_config FROM sessions"))
    assert configs["lone"] == '{"_delegate_from":"__orphaned__"}'
    assert configs["helper"] == '{"_delegate_from":"boss"}'
    assert configs["boss"] == '{"k": 1}'
    assert configs["up_child"] is None  # a compression child stays untagged


# ---------------------------------------------------------------------------
# What each version's open does to a file carrying OUR objects.
# ---------------------------------------------------------------------------

OUR_FTS = "CREATE VIRTUAL TABLE messages_fts USING fts5(content,content=messages,content_rowid=id)"
OUR_TRIGRAM = (
    "CREATE VIRTUAL TABLE messages_fts_trigram USING fts5("
    "content,content=messages,content_rowid=id,tokenize='trigram')"
)


def _store_file(tmp_path: Path, schema_version: int) -> Path:
    return up.build_store_db(tmp_path / "state.db", schema_version=schema_version)


def _objects(path: Path) -> dict[str, str | None]:
    return {name: sql for _kind, name, _table, sql in up.schema_signature(path)["objects"]}


@pytest.mark.parametrize("version", (7, 8, 9))
def test_v7_to_v9_skip_reasoning_content_on_a_file_stamped_7(tmp_path: Path, version: int) -> None:
    path = _store_file(tmp_path, 7)
    up.upstream_open(path, version)
    assert "reasoning_content" not in _columns(path, "messages")
    assert up.schema_signature(path)["schema_version"] == version if version > 7 else 7
    with pytest.raises(sqlite3.OperationalError, match="no column named reasoning_content"):
        up.upstream_append_message(path, version, "sess_other", "user", "hello")


@pytest.mark.parametrize("version", (7, 8, 9))
def test_v7_to_v9_keep_every_object_of_ours(tmp_path: Path, version: int) -> None:
    path = _store_file(tmp_path, 6)
    before = _objects(path)
    up.upstream_open(path, version)
    after = _objects(path)
    assert {
        k: v for k, v in after.items() if k in before and k not in ("sessions", "messages")
    } == {k: v for k, v in before.items() if k not in ("sessions", "messages")}
    assert set(after) - set(before) == {"state_meta", "sqlite_autoindex_state_meta_1"}
    new_id = up.upstream_append_message(path, version, "sess_other", "user", "服务端 docker")
    assert new_id in up.upstream_search(path, version, "docker")
    assert new_id in up.upstream_search(path, version, "服务端")
    assert up.fts_problems(path) == []


@pytest.mark.parametrize("schema_version", (6, 7))
def test_v10_keeps_our_indexes_and_their_triggers(tmp_path: Path, schema_version: int) -> None:
    path = _store_file(tmp_path, schema_version)
    before = _objects(path)
    up.upstream_open(path, 10)
    after = _objects(path)
    assert up.normalize_sql(after["messages_fts"]) == OUR_FTS
    assert up.normalize_sql(after["messages_fts_trigram"]) == OUR_TRIGRAM
    for trigger in up.FTS_TRIGGER_NAMES:
        assert after[trigger] == before[trigger]
    assert after["alembic_version"] == before["alembic_version"]
    assert up.schema_signature(path)["schema_version"] == 10
    new_id = up.upstream_append_message(path, 10, "sess_other", "user", "修改youer服务端的计划")
    assert new_id in up.upstream_search(path, 10, "服务端的")  # trigram route, our table
    assert up.fts_problems(path) == []


def test_v11_replaces_our_indexes_with_inline_ones(tmp_path: Path) -> None:
    path = _store_file(tmp_path, 7)
    up.upstream_open(path, 11)
    after = _objects(path)
    assert up.normalize_sql(after["messages_fts"]) == (
        "CREATE VIRTUAL TABLE messages_fts USING fts5(content)"
    )
    assert "messages_fts_content" in after  # inline: FTS5 keeps its own copy
    assert "DELETE FROM messages_fts WHERE rowid = old.id" in after["messages_fts_delete"]
    assert up.schema_signature(path)["schema_version"] == 11
    # Backfilled from every row, tool name and calls included.
    assert up.upstream_search(path, 11, "terminal")
    assert up.upstream_search(path, 11, "marmalade")
    assert up.upstream_search(path, 11, "记忆断裂")
    assert up.fts_problems(path) == []


def test_v25_keeps_our_tables_but_narrows_our_update_triggers(tmp_path: Path) -> None:
    path = _store_file(tmp_path, 7)
    before = _objects(path)
    up.upstream_open(path, 25)
    after = _objects(path)
    signature = up.schema_signature(path)
    assert signature["schema_version"] == 25
    assert signature["state_meta"] == {"fts_optimize_available": "1"}
    assert up.normalize_sql(after["messages_fts"]) == OUR_FTS
    assert up.normalize_sql(after["messages_fts_trigram"]) == OUR_TRIGRAM
    for event in ("insert", "delete"):
        for table in ("messages_fts", "messages_fts_trigram"):
            assert after[f"{table}_{event}"] == before[f"{table}_{event}"]
    for table in ("messages_fts", "messages_fts_trigram"):
        update = up.normalize_sql(after[f"{table}_update"])
        assert "AFTER UPDATE OF content,tool_name,tool_calls ON messages" in update
        assert f"DELETE FROM {table} WHERE rowid = old.id" in update
        assert "COALESCE(new.tool_name,'')" in update
    assert "messages_fts_trigram_src" not in after  # no v23 objects on a legacy layout
    assert up.fts_problems(path) == []


def test_after_v25_a_content_update_corrupts_our_indexes(tmp_path: Path) -> None:
    """The narrowed triggers v25 leaves on our external-content tables delete by
    rowid (FTS5 then reads the already-updated row) and index the joined text:
    one UPDATE of messages.content and the rank = 1 check fails. Upstream's
    code itself never updates content, tool_name or tool_calls."""
    path = _store_file(tmp_path, 7)
    up.upstream_open(path, 25)
    with sqlite3.connect(path) as connection:
        connection.execute("UPDATE messages SET active = 0 WHERE id = 1")  # not a trigger column
    assert up.fts_problems(path) == []
    with sqlite3.connect(path) as connection:
        connection.execute("UPDATE messages SET content = 'rewritten text' WHERE id = 1")
    assert up.fts_problems(path) != []


def test_v25_moves_inline_prompts_and_seeds_model_usage(tmp_path: Path) -> None:
    path = _store_file(tmp_path, 7)
    with sqlite3.connect(path) as connection:
        prompts = dict(connection.execute("SELECT id, system_prompt FROM sessions"))
    up.upstream_open(path, 25)
    with sqlite3.connect(path) as connection:
        rows = connection.execute(
            "SELECT s.id, s.system_prompt, p.prompt FROM sessions s "
            "LEFT JOIN system_prompts p ON p.hash = s.system_prompt_hash"
        ).fetchall()
        usage = dict(connection.execute("SELECT session_id, input_tokens FROM session_model_usage"))
        sessions = dict(connection.execute("SELECT id, input_tokens FROM sessions"))
    for session_id, inline, resolved in rows:
        assert inline is None
        assert resolved == prompts[session_id]
    assert usage == {k: v for k, v in sessions.items() if v}


@pytest.mark.parametrize("version", VERSIONS)
def test_our_file_stays_sound_after_each_version_writes(tmp_path: Path, version: int) -> None:
    path = _store_file(tmp_path, 6)
    up.upstream_open(path, version)
    up.upstream_create_session(path, version, "up_new", "cli", system_prompt="You are Hermes.")
    new_id = up.upstream_append_message(path, version, "up_new", "user", "聊天记录记忆断裂 docker")
    assert new_id in up.upstream_search(path, version, "docker")
    assert new_id in up.upstream_search(path, version, "记忆断裂")
    with sqlite3.connect(path) as connection:
        ours = connection.execute(
            "SELECT id FROM messages WHERE content LIKE '%服务端%'"
        ).fetchall()
    assert {i for (i,) in ours} <= set(up.upstream_search(path, version, "服务端"))
    assert up.fts_problems(path) == []
    assert up.counter_mismatches(path) == []


# ---------------------------------------------------------------------------
# The cjk index of a host that had the extension.
# ---------------------------------------------------------------------------


def test_cjk_index_needs_a_tokenizer_this_machine_lacks(tmp_path: Path) -> None:
    path = up.build_upstream_db(tmp_path / "state.db", 25, seed=False, cjk_index=True)
    assert "tokenize='cjk_unicode61'" in up.normalize_sql(_sql(path, "messages_fts_cjk"))
    assert up.fts_check(path)["messages_fts_cjk"].startswith(up.UNLOADABLE)
    assert up.fts_problems(path) == []
    up.upstream_create_session(path, 11, "s", "cli")
    with pytest.raises(sqlite3.OperationalError, match="no such tokenizer: cjk_unicode61"):
        up.upstream_append_message(path, 11, "s", "user", "你好")


def test_v25_without_the_tokenizer_drops_cjk_triggers_and_marks_stale(tmp_path: Path) -> None:
    path = up.build_upstream_db(tmp_path / "state.db", 25, seed=False, cjk_index=True)
    up.upstream_open(path, 25)
    objects = _objects(path)
    assert not set(up.CJK_TRIGGER_NAMES) & set(objects)
    assert "messages_fts_cjk" in objects  # the table stays for a capable host
    assert up.schema_signature(path)["state_meta"] == {
        up.CJK_STALE_KEY: "1",
        "fts_storage_version": "1",
    }
    up.fill_upstream_sample(path, 25)
    assert up.fts_problems(path) == []
    assert up.upstream_search(path, 25, "服务端")


def test_build_refuses_impossible_cjk_files(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        up.build_upstream_db(tmp_path / "a.db", 25, cjk_index=True)
    with pytest.raises(ValueError):
        up.build_upstream_db(tmp_path / "b.db", 11, seed=False, cjk_index=True)


def test_fts_check_reports_a_broken_external_index(tmp_path: Path) -> None:
    path = _store_file(tmp_path, 6)
    with sqlite3.connect(path) as connection:
        connection.execute("INSERT INTO messages_fts(rowid, content) VALUES (1, 'bogus words')")
    assert [p.split(":")[0] for p in up.fts_problems(path)] == ["messages_fts"]


def test_normalize_sql_folds_layout_only() -> None:
    assert up.normalize_sql("CREATE TABLE t (\n  a ,\n b )") == "CREATE TABLE t(a,b)"
    assert up.normalize_sql("CREATE TABLE t(a)") != up.normalize_sql("CREATE TABLE t(b)")


def test_wal_reset_vulnerable_releases() -> None:
    assert up.wal_reset_vulnerable((3, 40, 1))
    assert not up.wal_reset_vulnerable((3, 44, 6))
    assert not up.wal_reset_vulnerable((3, 51, 3))
