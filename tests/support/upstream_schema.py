"""state.db files as the agent's own upstream store leaves them, at schema versions 7..25.

The design document stops at schema version 6; the agent's ``hermes_state``
went on. Its public history moved ``state.db`` through version 7 (messages.
``reasoning_content`` and a ``state_meta`` key/value table), 8 (sessions.
``api_call_count``), 9 (messages.``codex_message_items``), 10 (columns added by
diffing live tables against the declared schema; a trigram FTS5 table), 11 (both
FTS tables rebuilt inline over content, tool name and tool calls) up to 25 (many
columns and tables, external-content FTS over views, content-addressed system
prompts). People's files are at those versions and are shared with programs
running that code, so hermes_store has to read and write them, and files it
wrote have to keep working for that code.

This module rebuilds, with the standard library only and from the facts of
each version (its DDL, its open-time steps, the rows its writes leave), what
upstream's code does to a file:

* :func:`build_upstream_db` -- a file created fresh by upstream vN, optionally
  holding sample sessions written the way vN writes them;
* :func:`upstream_open` -- what vN's open does to an EXISTING file: version
  steps, column reconciliation, FTS creation, dropping, rebuilding, trigger
  replacement, system-prompt de-duplication, the schema_version bump;
* ``upstream_*`` writers and readers -- vN's observable INSERTs/UPDATEs and
  its search routing, so a test can check that upstream finds what we wrote;
* :func:`fts_check`, :func:`schema_signature`, :func:`add_cjk_index`.

Like :mod:`tests.support.legacy_schema`, it trusts none of hermes_store's code. Its
output was compared object by object with files made by the real upstream
code (a harness kept outside the repository); the fingerprints recorded in
``tests/agent_files/test_upstream_schema.py`` are the ones the real code produced.

Known simplifications, none of which changes a file these tests build:
times come from a deterministic clock instead of ``time.time()``; the v25
open skips its sessions.json backfill (step 18: only reads a file beside the
database that these tests never create) and its two primary-key repairs of
tables older than v22 (no-ops on tables born from the v25 DDL); an
``upstream_open`` always acts as a process that cannot load the
``cjk_unicode61`` tokenizer, as every process on this machine is.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from hermes_store.backends.sqlite.library import driver as sqlite3
from tests.support.legacy_schema import DOCUMENTED_FTS_DDL, build_legacy_db

UPSTREAM_VERSIONS = (7, 8, 9, 10, 11, 25)

# ---------------------------------------------------------------------------
# Table DDL. Column lists are the facts; the layout is ours. sqlite_master
# keeps a CREATE statement's text, so the comparison helpers below compare
# statements with whitespace folded (see :func:`normalize_sql`).
# ---------------------------------------------------------------------------

_DOC_SESSION_COLUMNS = (
    "id TEXT PRIMARY KEY",
    "source TEXT NOT NULL",
    "user_id TEXT",
    "model TEXT",
    "model_config TEXT",
    "system_prompt TEXT",
    "parent_session_id TEXT",
    "started_at REAL NOT NULL",
    "ended_at REAL",
    "end_reason TEXT",
    "message_count INTEGER DEFAULT 0",
    "tool_call_count INTEGER DEFAULT 0",
    "input_tokens INTEGER DEFAULT 0",
    "output_tokens INTEGER DEFAULT 0",
    "cache_read_tokens INTEGER DEFAULT 0",
    "cache_write_tokens INTEGER DEFAULT 0",
    "reasoning_tokens INTEGER DEFAULT 0",
    "billing_provider TEXT",
    "billing_base_url TEXT",
    "billing_mode TEXT",
    "estimated_cost_usd REAL",
    "actual_cost_usd REAL",
    "cost_status TEXT",
    "cost_source TEXT",
    "pricing_version TEXT",
    "title TEXT",
)
_PARENT_FK = "FOREIGN KEY (parent_session_id) REFERENCES sessions(id)"

_DOC_MESSAGE_HEAD = (
    "id INTEGER PRIMARY KEY AUTOINCREMENT",
    "session_id TEXT NOT NULL REFERENCES sessions(id)",
    "role TEXT NOT NULL",
    "content TEXT",
    "tool_call_id TEXT",
    "tool_calls TEXT",
    "tool_name TEXT",
)
_DOC_MESSAGE_TAIL = (
    "timestamp REAL NOT NULL",
    "token_count INTEGER",
    "finish_reason TEXT",
    "reasoning TEXT",
)

_STATE_META_COLUMNS = ("key TEXT PRIMARY KEY", "value TEXT")

_V7_INDEXES = (
    ("idx_sessions_source", "sessions(source)"),
    ("idx_sessions_parent", "sessions(parent_session_id)"),
    ("idx_sessions_started", "sessions(started_at DESC)"),
    ("idx_messages_session", "messages(session_id, timestamp)"),
)

TITLE_INDEX = (
    "CREATE UNIQUE INDEX IF NOT EXISTS idx_sessions_title_unique "
    "ON sessions(title) WHERE title IS NOT NULL"
)


def _table(name: str, columns: Sequence[str]) -> str:
    body = ",\n    ".join(columns)
    return f"CREATE TABLE IF NOT EXISTS {name} (\n    {body}\n);\n"


def _index(name: str, target: str, where: str = "", unique: bool = False) -> str:
    kind = "UNIQUE INDEX" if unique else "INDEX"
    clause = f" WHERE {where}" if where else ""
    return f"CREATE {kind} IF NOT EXISTS {name} ON {target}{clause};\n"


def session_columns_v7_to_v11(version: int) -> tuple[str, ...]:
    """``sessions`` as upstream 7..11 declare it (``api_call_count`` from 8 on)."""
    extra = ("api_call_count INTEGER DEFAULT 0",) if version >= 8 else ()
    return _DOC_SESSION_COLUMNS + extra + (_PARENT_FK,)


def message_columns_v7_to_v11(version: int) -> tuple[str, ...]:
    """``messages`` as upstream 7..11 declare it (``codex_message_items`` from 9 on)."""
    tail = (
        "reasoning_content TEXT",
        "reasoning_details TEXT",
        "codex_reasoning_items TEXT",
    )
    extra = ("codex_message_items TEXT",) if version >= 9 else ()
    return _DOC_MESSAGE_HEAD + _DOC_MESSAGE_TAIL + tail + extra


def schema_script_v7_to_v11(version: int) -> str:
    """The CREATE ... IF NOT EXISTS script upstream 7..11 run on every open.

    The unique title index is not in it: those versions create it after their
    version steps, once the ``title`` column is certain to exist.
    """
    parts = [
        _table("schema_version", ("version INTEGER NOT NULL",)),
        _table("sessions", session_columns_v7_to_v11(version)),
        _table("messages", message_columns_v7_to_v11(version)),
        _table("state_meta", _STATE_META_COLUMNS),
    ]
    parts += [_index(name, target) for name, target in _V7_INDEXES]
    return "\n".join(parts)


# --- version 25 ------------------------------------------------------------

V25_SESSION_COLUMNS = (
    "id TEXT PRIMARY KEY",
    "source TEXT NOT NULL",
    "user_id TEXT",
    "session_key TEXT",
    "chat_id TEXT",
    "chat_type TEXT",
    "thread_id TEXT",
    "display_name TEXT",
    "origin_json TEXT",
    "expiry_finalized INTEGER DEFAULT 0",
    "model TEXT",
    "model_config TEXT",
    "system_prompt TEXT",
    "system_prompt_hash TEXT",
    "parent_session_id TEXT",
    "started_at REAL NOT NULL",
    "ended_at REAL",
    "end_reason TEXT",
    "message_count INTEGER DEFAULT 0",
    "tool_call_count INTEGER DEFAULT 0",
    "input_tokens INTEGER DEFAULT 0",
    "output_tokens INTEGER DEFAULT 0",
    "cache_read_tokens INTEGER DEFAULT 0",
    "cache_write_tokens INTEGER DEFAULT 0",
    "reasoning_tokens INTEGER DEFAULT 0",
    "cwd TEXT",
    "git_branch TEXT",
    "git_repo_root TEXT",
    "billing_provider TEXT",
    "billing_base_url TEXT",
    "billing_mode TEXT",
    "estimated_cost_usd REAL",
    "actual_cost_usd REAL",
    "cost_status TEXT",
    "cost_source TEXT",
    "pricing_version TEXT",
    "title TEXT",
    "last_activity_at REAL",
    "last_activity_description TEXT",
    "last_activity_provenance TEXT",
    "api_call_count INTEGER DEFAULT 0",
    "handoff_state TEXT",
    "handoff_platform TEXT",
    "handoff_error TEXT",
    "compression_failure_cooldown_until REAL",
    "compression_failure_error TEXT",
    "compression_fallback_streak INTEGER NOT NULL DEFAULT 0",
    "compression_ineffective_count INTEGER NOT NULL DEFAULT 0",
    "profile_name TEXT",
    "rewind_count INTEGER NOT NULL DEFAULT 0",
    "archived INTEGER NOT NULL DEFAULT 0",
    "pinned INTEGER NOT NULL DEFAULT 0",
    _PARENT_FK,
    "FOREIGN KEY (system_prompt_hash) REFERENCES system_prompts(hash)",
)

V25_MESSAGE_COLUMNS = (
    *_DOC_MESSAGE_HEAD,
    "effect_disposition TEXT",
    *_DOC_MESSAGE_TAIL,
    "reasoning_content TEXT",
    "reasoning_details TEXT",
    "codex_reasoning_items TEXT",
    "codex_message_items TEXT",
    "platform_message_id TEXT",
    "observed INTEGER DEFAULT 0",
    "active INTEGER NOT NULL DEFAULT 1",
    "compacted INTEGER NOT NULL DEFAULT 0",
    "api_content TEXT",
    "display_kind TEXT",
    "display_metadata TEXT",
)

_USAGE_KEY = "session_id, model, billing_provider, billing_base_url, billing_mode, task"
V25_USAGE_COLUMNS = (
    "session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE",
    "model TEXT NOT NULL",
    "billing_provider TEXT NOT NULL DEFAULT ''",
    "billing_base_url TEXT NOT NULL DEFAULT ''",
    "billing_mode TEXT NOT NULL DEFAULT ''",
    "task TEXT NOT NULL DEFAULT ''",
    "api_call_count INTEGER NOT NULL DEFAULT 0",
    "input_tokens INTEGER NOT NULL DEFAULT 0",
    "output_tokens INTEGER NOT NULL DEFAULT 0",
    "cache_read_tokens INTEGER NOT NULL DEFAULT 0",
    "cache_write_tokens INTEGER NOT NULL DEFAULT 0",
    "reasoning_tokens INTEGER NOT NULL DEFAULT 0",
    "estimated_cost_usd REAL NOT NULL DEFAULT 0",
    "actual_cost_usd REAL NOT NULL DEFAULT 0",
    "cost_status TEXT",
    "cost_source TEXT",
    "first_seen REAL",
    "last_seen REAL",
    f"PRIMARY KEY ({_USAGE_KEY})",
)

V25_OTHER_TABLES: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "gateway_routing",
        (
            "scope TEXT NOT NULL DEFAULT ''",
            "session_key TEXT NOT NULL",
            "entry_json TEXT NOT NULL",
            "updated_at REAL NOT NULL",
            "PRIMARY KEY (scope, session_key)",
        ),
    ),
    (
        "compression_locks",
        (
            "session_id TEXT PRIMARY KEY",
            "holder TEXT NOT NULL",
            "acquired_at REAL NOT NULL",
            "expires_at REAL NOT NULL",
        ),
    ),
    (
        "async_delegations",
        (
            "delegation_id TEXT PRIMARY KEY",
            "origin_session TEXT NOT NULL",
            "origin_ui_session_id TEXT NOT NULL DEFAULT ''",
            "parent_session_id TEXT",
            "state TEXT NOT NULL",
            "dispatched_at REAL NOT NULL",
            "completed_at REAL",
            "updated_at REAL NOT NULL",
            "event_json TEXT",
            "result_json TEXT",
            "delivery_state TEXT NOT NULL DEFAULT 'pending'",
            "delivery_attempts INTEGER NOT NULL DEFAULT 0",
            "delivered_at REAL",
            "owner_pid INTEGER",
            "owner_started_at INTEGER",
            "task_json TEXT",
            "delivery_claim TEXT",
            "delivery_claimed_at REAL",
        ),
    ),
)

# (name, target, partial-index condition) in the v25 script.
V25_INDEXES: tuple[tuple[str, str, str], ...] = (
    ("idx_sessions_source", "sessions(source)", ""),
    ("idx_sessions_source_id", "sessions(source, id)", ""),
    ("idx_sessions_parent", "sessions(parent_session_id)", ""),
    ("idx_sessions_started", "sessions(started_at DESC)", ""),
    ("idx_messages_session", "messages(session_id, timestamp)", ""),
    ("idx_messages_session_id", "messages(session_id, id)", ""),
    (
        "idx_messages_assistant_calls_by_session",
        "messages(session_id)",
        "role = 'assistant' AND tool_calls IS NOT NULL",
    ),
    ("idx_compression_locks_expires", "compression_locks(expires_at)", ""),
    ("idx_session_model_usage_session", "session_model_usage(session_id)", ""),
    ("idx_session_model_usage_model", "session_model_usage(model)", ""),
    ("idx_async_delegations_delivery", "async_delegations(delivery_state, completed_at)", ""),
)

# Created after column reconciliation: they name columns an old file lacks.
V25_LATE_INDEXES: tuple[tuple[str, str, str], ...] = (
    (
        "idx_messages_platform_msg_id",
        "messages(session_id, platform_message_id)",
        "platform_message_id IS NOT NULL",
    ),
    ("idx_messages_session_active", "messages(session_id, active, timestamp)", ""),
    ("idx_messages_active_null", "messages(active)", "active IS NULL"),
    ("idx_sessions_session_key", "sessions(session_key, started_at DESC)", ""),
    (
        "idx_sessions_gateway_peer",
        "sessions(source, user_id, chat_id, chat_type, thread_id, started_at DESC)",
        "",
    ),
    ("idx_sessions_handoff_state", "sessions(handoff_state, started_at)", ""),
    ("idx_sessions_system_prompt_hash", "sessions(system_prompt_hash)", ""),
)


def schema_script_v25() -> str:
    """The CREATE ... IF NOT EXISTS script upstream 25 runs on every open."""
    parts = [
        _table("schema_version", ("version INTEGER NOT NULL",)),
        _table("system_prompts", ("hash TEXT PRIMARY KEY", "prompt TEXT NOT NULL")),
        _table("sessions", V25_SESSION_COLUMNS),
        _table("messages", V25_MESSAGE_COLUMNS),
        _table("session_model_usage", V25_USAGE_COLUMNS),
        _table("state_meta", _STATE_META_COLUMNS),
    ]
    parts += [_table(name, columns) for name, columns in V25_OTHER_TABLES]
    parts += [_index(name, target, where) for name, target, where in V25_INDEXES]
    return "\n".join(parts)


# ---------------------------------------------------------------------------
# FTS DDL of each layout.
# ---------------------------------------------------------------------------


def _joined(row: str) -> str:
    """The text upstream's inline indexes hold: content, tool name, tool calls."""
    return (
        f"COALESCE({row}.content, '') || ' ' || COALESCE({row}.tool_name, '') "
        f"|| ' ' || COALESCE({row}.tool_calls, '')"
    )


JOINED_COLUMNS_SQL = _joined("messages").replace("messages.", "")
"""``content || ' ' || tool_name || ' ' || tool_calls`` with NULLs as '' (v10+ inline)."""


def _inline_fts(table: str, tokenize: str = "") -> str:
    options = f",\n    tokenize='{tokenize}'" if tokenize else ""
    return f"CREATE VIRTUAL TABLE IF NOT EXISTS {table} USING fts5(\n    content{options}\n);\n"


def _inline_triggers(table: str, *, delete_command: bool, narrow_update: bool) -> str:
    """Insert/delete/update triggers of an inline index over the joined text.

    ``delete_command``: v10 removed rows with FTS5's external-content
    ``'delete'`` command, which an inline table refuses ("SQL logic error"),
    so deleting a message fails on a v10-created file; v11 deletes by rowid.
    ``narrow_update``: v25 fires on ``UPDATE OF content, tool_name, tool_calls``
    only; v10/v11 on every UPDATE.
    """
    insert = f"INSERT INTO {table}(rowid, content) VALUES (new.id, {_joined('new')});"
    if delete_command:
        remove = (
            f"INSERT INTO {table}({table}, rowid, content) VALUES('delete', old.id, old.content);"
        )
    else:
        remove = f"DELETE FROM {table} WHERE rowid = old.id;"
    event = (
        "AFTER UPDATE OF content, tool_name, tool_calls ON messages"
        if narrow_update
        else ("AFTER UPDATE ON messages")
    )
    return (
        f"CREATE TRIGGER IF NOT EXISTS {table}_insert AFTER INSERT ON messages BEGIN\n"
        f"    {insert}\nEND;\n"
        f"CREATE TRIGGER IF NOT EXISTS {table}_delete AFTER DELETE ON messages BEGIN\n"
        f"    {remove}\nEND;\n"
        f"CREATE TRIGGER IF NOT EXISTS {table}_update {event} BEGIN\n"
        f"    {remove}\n    {insert}\nEND;\n"
    )


def inline_fts_script(version: int, table: str) -> str:
    """``messages_fts`` or ``messages_fts_trigram`` as v10, v11 or v25 (legacy) declare it."""
    tokenize = "trigram" if table.endswith("_trigram") else ""
    return _inline_fts(table, tokenize) + _inline_triggers(
        table, delete_command=version == 10, narrow_update=version >= 25
    )


def _gate(row: str, high_key: str, progress_key: str) -> str:
    """v23's trigger gate: a row is indexed iff id > high water or id <= progress."""

    def marker(key: str) -> str:
        return f"(SELECT CAST(value AS INTEGER) FROM state_meta WHERE key = '{key}')"

    return (
        f"({row}.id > COALESCE({marker(high_key)}, -1) "
        f"OR {row}.id <= COALESCE({marker(progress_key)}, -1))"
    )


_THREE = "content, tool_name, tool_calls"


def _external_triggers(table: str, *, skip_tools: bool, keys: tuple[str, str]) -> str:
    """v23's gated triggers of an external-content index over three columns."""
    new_gate, old_gate = _gate("new", *keys), _gate("old", *keys)
    tool_new = "new.role <> 'tool' AND " if skip_tools else ""
    tool_old = "old.role <> 'tool' AND " if skip_tools else ""
    insert = (
        f"INSERT INTO {table}(rowid, {_THREE}) "
        "VALUES (new.id, new.content, new.tool_name, new.tool_calls);"
    )
    delete = (
        f"INSERT INTO {table}({table}, rowid, {_THREE}) "
        f"VALUES ('delete', old.id, old.content, old.tool_name, old.tool_calls);"
    )
    changed = " OR ".join(f"old.{c} IS NOT new.{c}" for c in ("content", "tool_name", "tool_calls"))
    if skip_tools:
        of_columns = f"{_THREE}, role"
        changed += " OR old.role IS NOT new.role"
        update_body = (
            f"INSERT INTO {table}({table}, rowid, {_THREE}) "
            "SELECT 'delete', old.id, old.content, old.tool_name, old.tool_calls "
            "WHERE old.role <> 'tool';\n"
            f"    INSERT INTO {table}(rowid, {_THREE}) "
            f"SELECT new.id, new.content, new.tool_name, new.tool_calls WHERE new.role <> 'tool';"
        )
    else:
        of_columns = _THREE
        update_body = f"{delete}\n    {insert}"
    return (
        f"CREATE TRIGGER IF NOT EXISTS {table}_insert AFTER INSERT ON messages\n"
        f"WHEN {tool_new}{new_gate}\nBEGIN\n    {insert}\nEND;\n"
        f"CREATE TRIGGER IF NOT EXISTS {table}_delete AFTER DELETE ON messages\n"
        f"WHEN {tool_old}{old_gate}\nBEGIN\n    {delete}\nEND;\n"
        f"CREATE TRIGGER IF NOT EXISTS {table}_update\n"
        f"AFTER UPDATE OF {of_columns} ON messages\n"
        f"WHEN ({changed})\n   AND {old_gate}\nBEGIN\n    {update_body}\nEND;\n"
    )


def _source_view(name: str) -> str:
    return (
        f"CREATE VIEW IF NOT EXISTS {name} AS\n"
        f"    SELECT id, role, {_THREE}\n    FROM messages\n    WHERE role <> 'tool';\n"
    )


def _external_table(table: str, source: str, tokenize: str = "") -> str:
    options = f",\n    tokenize='{tokenize}'" if tokenize else ""
    return (
        f"CREATE VIRTUAL TABLE IF NOT EXISTS {table} USING fts5(\n"
        f"    content,\n    tool_name,\n    tool_calls,\n"
        f"    content='{source}',\n    content_rowid='id'{options}\n);\n"
    )


_REBUILD_KEYS = ("fts_rebuild_high_water", "fts_rebuild_progress")
_CJK_REBUILD_KEYS = ("fts_cjk_rebuild_high_water", "fts_cjk_rebuild_progress")

V23_FTS_SQL = _external_table("messages_fts", "messages") + _external_triggers(
    "messages_fts", skip_tools=False, keys=_REBUILD_KEYS
)
V23_TRIGRAM_SQL = (
    _source_view("messages_fts_trigram_src")
    + _external_table("messages_fts_trigram", "messages_fts_trigram_src", "trigram")
    + _external_triggers("messages_fts_trigram", skip_tools=True, keys=_REBUILD_KEYS)
)
CJK_TABLE_SQL = _source_view("messages_fts_cjk_src") + _external_table(
    "messages_fts_cjk", "messages_fts_cjk_src", "cjk_unicode61"
)
CJK_TRIGGER_SQL = _external_triggers("messages_fts_cjk", skip_tools=True, keys=_CJK_REBUILD_KEYS)

FTS_TRIGGER_NAMES = tuple(
    f"messages_fts{infix}_{event}"
    for infix in ("", "_trigram")
    for event in ("insert", "delete", "update")
)
CJK_TRIGGER_NAMES = tuple(f"messages_fts_cjk_{event}" for event in ("insert", "delete", "update"))
CJK_STALE_KEY = "fts_cjk_stale"

# hermes_store's revision 0007 (our own DDL): external-content trigram over
# messages.content with broad triggers named like upstream's.
STORE_TRIGRAM_SQL = """\
CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts_trigram USING fts5(
    content,
    content=messages,
    content_rowid=id,
    tokenize='trigram'
);
CREATE TRIGGER IF NOT EXISTS messages_fts_trigram_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts_trigram(rowid, content) VALUES (new.id, new.content);
END;
CREATE TRIGGER IF NOT EXISTS messages_fts_trigram_delete AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts_trigram(messages_fts_trigram, rowid, content)
        VALUES('delete', old.id, old.content);
END;
CREATE TRIGGER IF NOT EXISTS messages_fts_trigram_update AFTER UPDATE ON messages BEGIN
    INSERT INTO messages_fts_trigram(messages_fts_trigram, rowid, content)
        VALUES('delete', old.id, old.content);
    INSERT INTO messages_fts_trigram(rowid, content) VALUES (new.id, new.content);
END;
"""

# ---------------------------------------------------------------------------
# Connections, clock, small SQL helpers.
# ---------------------------------------------------------------------------


class Clock:
    """A deterministic stand-in for ``time.time()``: each call is 1.5 s later."""

    def __init__(self, start: float = 1_760_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        self.now += 1.5
        return self.now


DEFAULT_CLOCK = Clock()


@contextmanager
def _connection(path: Path) -> Iterator[sqlite3.Connection]:
    """An autocommit connection with foreign keys on, as every version opens one.

    ``synchronous=OFF`` is ours: it changes nothing in the file, only skips the
    flushes that would make a suite of small fixture writes slow.
    """
    connection = sqlite3.connect(path, isolation_level=None)
    connection.row_factory = sqlite3.Row
    try:
        connection.execute("PRAGMA foreign_keys=ON")
        connection.execute("PRAGMA synchronous=OFF")
        yield connection
    finally:
        connection.close()


@contextmanager
def _write(path: Path) -> Iterator[sqlite3.Connection]:
    """One ``BEGIN IMMEDIATE`` transaction, the way every version writes."""
    with _connection(path) as connection:
        connection.execute("BEGIN IMMEDIATE")
        try:
            yield connection
        except BaseException:
            connection.execute("ROLLBACK")
            raise
        connection.execute("COMMIT")


def _exists(connection: sqlite3.Connection, kind: str, name: str) -> bool:
    row = connection.execute(
        "SELECT 1 FROM sqlite_master WHERE type = ? AND name = ?", (kind, name)
    ).fetchone()
    return row is not None


def _sql_of(connection: sqlite3.Connection, kind: str, name: str) -> str | None:
    row = connection.execute(
        "SELECT sql FROM sqlite_master WHERE type = ? AND name = ?", (kind, name)
    ).fetchone()
    return row[0] if row else None


def _stored_version(connection: sqlite3.Connection) -> int | None:
    row = connection.execute("SELECT version FROM schema_version LIMIT 1").fetchone()
    return None if row is None else row[0]


def _set_version(connection: sqlite3.Connection, version: int) -> None:
    connection.execute("UPDATE schema_version SET version = ?", (version,))


def _set_meta(connection: sqlite3.Connection, key: str, value: str) -> None:
    connection.execute(
        "INSERT INTO state_meta (key, value) VALUES (?, ?) "
        "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        (key, value),
    )


def _add_column(connection: sqlite3.Connection, table: str, definition: str) -> None:
    """``ALTER TABLE ... ADD COLUMN`` with "already there" ignored (v7..v9 steps)."""
    with suppress(sqlite3.OperationalError):
        connection.execute(f"ALTER TABLE {table} ADD COLUMN {definition}")


def declared_columns(script: str) -> dict[str, dict[str, str]]:
    """table -> column -> the type clause ``ADD COLUMN`` gets, read back from SQLite.

    Upstream (v10+) learns its declared columns by running its script in an
    in-memory database and reading ``PRAGMA table_info``; the clause of a
    missing column is rebuilt as type, ``NOT NULL`` (not for the key) and
    ``DEFAULT``, which is why a reconciled column never carries a REFERENCES.
    """
    scratch = sqlite3.connect(":memory:")
    try:
        scratch.executescript(script)
        tables = [
            row[0]
            for row in scratch.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            )
        ]
        result: dict[str, dict[str, str]] = {}
        for table in tables:
            columns: dict[str, str] = {}
            for _cid, name, kind, notnull, default, pk in scratch.execute(
                f'PRAGMA table_info("{table}")'
            ):
                parts = [kind] if kind else []
                if notnull and not pk:
                    parts.append("NOT NULL")
                if default is not None:
                    parts.append(f"DEFAULT {default}")
                columns[name] = " ".join(parts)
            result[table] = columns
        return result
    finally:
        scratch.close()


def _reconcile(connection: sqlite3.Connection, script: str) -> None:
    """v10+: add every declared column the live table lacks, in declared order."""
    for table, columns in declared_columns(script).items():
        live = {row[1] for row in connection.execute(f'PRAGMA table_info("{table}")')}
        for name, clause in columns.items():
            if name in live:
                continue
            with suppress(sqlite3.OperationalError):  # upstream logs and goes on
                connection.execute(f'ALTER TABLE "{table}" ADD COLUMN "{name}" {clause}')


def _fts_readable(connection: sqlite3.Connection, table: str) -> bool | None:
    """True if the FTS table answers, False if absent, None if its tokenizer is missing."""
    try:
        connection.execute(f"SELECT * FROM {table} LIMIT 0")
        return True
    except sqlite3.OperationalError as error:
        text = str(error).lower()
        if "no such tokenizer" in text or "no such module" in text:
            return None
        if "no such table" in text:
            return False
        raise


# ---------------------------------------------------------------------------
# Upstream's open, per version.
# ---------------------------------------------------------------------------

# v7..v9: (version, steps) where a step is (table, column clause) or an SQL
# statement; the names are quoted from step 5 on, as those versions wrote them.
_LADDER: tuple[tuple[int, tuple[tuple[str, str] | str, ...]], ...] = (
    (2, (("messages", "finish_reason TEXT"),)),
    (3, (("sessions", "title TEXT"),)),
    (4, (TITLE_INDEX,)),
    (
        5,
        tuple(
            ("sessions", f'"{name}" {kind}')
            for name, kind in (
                ("cache_read_tokens", "INTEGER DEFAULT 0"),
                ("cache_write_tokens", "INTEGER DEFAULT 0"),
                ("reasoning_tokens", "INTEGER DEFAULT 0"),
                ("billing_provider", "TEXT"),
                ("billing_base_url", "TEXT"),
                ("billing_mode", "TEXT"),
                ("estimated_cost_usd", "REAL"),
                ("actual_cost_usd", "REAL"),
                ("cost_status", "TEXT"),
                ("cost_source", "TEXT"),
                ("pricing_version", "TEXT"),
            )
        ),
    ),
    (
        6,
        tuple(
            ("messages", f'"{name}" TEXT')
            for name in ("reasoning", "reasoning_details", "codex_reasoning_items")
        ),
    ),
    (7, (("messages", '"reasoning_content" TEXT'),)),
    (8, (("sessions", '"api_call_count" INTEGER DEFAULT 0'),)),
    (9, (("messages", '"codex_message_items" TEXT'),)),
)


def _journal_mode(connection: sqlite3.Connection, version: int) -> None:
    """v7..v11 always ask for WAL; v25 refuses WAL on SQLite builds it knows to
    carry the WAL-reset bug (3.40.1 among them): it keeps a file already in WAL
    and otherwise sets DELETE."""
    if version < 25 or not wal_reset_vulnerable():
        connection.execute("PRAGMA journal_mode=WAL")
        return
    current = connection.execute("PRAGMA journal_mode").fetchone()[0]
    if str(current).lower() != "wal":
        connection.execute("PRAGMA journal_mode=DELETE")


def wal_reset_vulnerable(info: tuple[int, ...] = sqlite3.sqlite_version_info) -> bool:
    """Upstream v25's list of SQLite releases with the WAL-reset bug."""
    v = tuple(info[:3])
    if v < (3, 7, 0) or v >= (3, 51, 3):
        return False
    return not ((3, 50, 7) <= v < (3, 51, 0) or (3, 44, 6) <= v < (3, 45, 0))


def _open_v7_to_v9(connection: sqlite3.Connection, version: int) -> None:
    connection.executescript(schema_script_v7_to_v11(version))
    current = _stored_version(connection)
    if current is None:
        connection.execute("INSERT INTO schema_version (version) VALUES (?)", (version,))
    else:
        for step_version, steps in _LADDER:
            if current >= step_version or step_version > version:
                continue
            for step in steps:
                if isinstance(step, str):
                    with suppress(sqlite3.OperationalError):
                        connection.execute(step)
                else:
                    _add_column(connection, *step)
            _set_version(connection, step_version)
    _title_index(connection)
    if _fts_readable(connection, "messages_fts") is False:
        connection.executescript(DOCUMENTED_FTS_DDL)


def _open_v10_v11(connection: sqlite3.Connection, version: int) -> None:
    script = schema_script_v7_to_v11(version)
    connection.executescript(script)
    _reconcile(connection, script)
    current = _stored_version(connection)
    if current is None:
        connection.execute("INSERT INTO schema_version (version) VALUES (?)", (version,))
    else:
        if current < 10 and _fts_readable(connection, "messages_fts_trigram") is False:
            # v10's step: create the trigram index and fill it from content only.
            connection.executescript(inline_fts_script(version, "messages_fts_trigram"))
            connection.execute(
                "INSERT INTO messages_fts_trigram(rowid, content) "
                "SELECT id, content FROM messages WHERE content IS NOT NULL"
            )
        if current < 11 and version >= 11:
            _rebuild_inline_v11(connection)
        if current < version:
            _set_version(connection, version)
    _title_index(connection)
    for table in ("messages_fts", "messages_fts_trigram"):
        if _fts_readable(connection, table) is False:
            connection.executescript(inline_fts_script(version, table))


def _rebuild_inline_v11(connection: sqlite3.Connection) -> None:
    """v11's step: drop both FTS tables and the six triggers, whoever made them,
    recreate both inline over the joined text and fill them from every row."""
    for name in FTS_TRIGGER_NAMES:
        connection.execute(f"DROP TRIGGER IF EXISTS {name}")
    for table in ("messages_fts", "messages_fts_trigram"):
        connection.execute(f"DROP TABLE IF EXISTS {table}")
    for table in ("messages_fts", "messages_fts_trigram"):
        connection.executescript(inline_fts_script(11, table))
    for table in ("messages_fts", "messages_fts_trigram"):
        connection.execute(
            f"INSERT INTO {table}(rowid, content) SELECT id, {JOINED_COLUMNS_SQL} FROM messages"
        )


def _title_index(connection: sqlite3.Connection) -> None:
    with suppress(sqlite3.OperationalError):
        connection.execute(TITLE_INDEX)


def _title_index_v25(connection: sqlite3.Connection) -> None:
    """v25 repairs duplicate titles (the newest row keeps it) before the index."""
    try:
        connection.execute(TITLE_INDEX)
    except sqlite3.IntegrityError:
        connection.execute(
            "UPDATE sessions SET title = NULL WHERE title IS NOT NULL AND EXISTS ("
            "SELECT 1 FROM sessions AS later "
            "WHERE later.title = sessions.title AND later.rowid > sessions.rowid)"
        )
        connection.execute(TITLE_INDEX)
    except sqlite3.OperationalError:
        pass


def has_legacy_fts(connection: sqlite3.Connection) -> bool:
    """v25's test for a pre-v23 index: ``messages_fts`` exists and its CREATE
    does not mention ``tool_name``. True for v10/v11 inline tables AND for the
    document's external-content table over ``content`` (ours)."""
    sql = _sql_of(connection, "table", "messages_fts")
    return sql is not None and "tool_name" not in sql


def _is_broad_update(sql: str | None) -> bool:
    compact = " ".join((sql or "").split()).upper()
    return "AFTER UPDATE OF " not in compact and "AFTER UPDATE ON " in compact


def _trigger_count(connection: sqlite3.Connection, names: Sequence[str]) -> int:
    marks = ",".join("?" for _ in names)
    row = connection.execute(
        f"SELECT COUNT(*) FROM sqlite_master WHERE type = 'trigger' AND name IN ({marks})",
        tuple(names),
    ).fetchone()
    return row[0]


def _ensure_fts(connection: sqlite3.Connection, table: str, script: str) -> bool:
    """Run a layout's script (IF NOT EXISTS: fills in missing triggers) unless
    the table's tokenizer cannot be loaded here."""
    if _fts_readable(connection, table) is None:
        return False
    try:
        connection.executescript(script)
    except sqlite3.OperationalError as error:
        if "no such tokenizer" in str(error).lower():
            return False
        raise
    return True


def _legacy_scripts() -> tuple[tuple[str, str], ...]:
    return tuple(
        (table, inline_fts_script(25, table)) for table in ("messages_fts", "messages_fts_trigram")
    )


def _v23_scripts() -> tuple[tuple[str, str], ...]:
    return (("messages_fts", V23_FTS_SQL), ("messages_fts_trigram", V23_TRIGRAM_SQL))


def _v25_ensure_fts(connection: sqlite3.Connection) -> None:
    """v25's FTS block: keep a legacy layout (adding missing triggers, refilling
    both indexes with the joined text if any trigger was missing), or ensure
    the v23 layout (``'rebuild'`` if a trigger was missing) and the cjk index."""
    legacy = has_legacy_fts(connection)
    repair = _trigger_count(connection, FTS_TRIGGER_NAMES) < len(FTS_TRIGGER_NAMES)
    (base, base_sql), (trigram, trigram_sql) = _legacy_scripts() if legacy else _v23_scripts()
    if not _ensure_fts(connection, base, base_sql):
        return
    with_trigram = _ensure_fts(connection, trigram, trigram_sql)
    if repair and legacy:
        tables = (base, trigram) if with_trigram else (base,)
        for table in tables:
            connection.execute(f"DELETE FROM {table}")
            connection.execute(
                f"INSERT INTO {table}(rowid, content) SELECT id, {JOINED_COLUMNS_SQL} FROM messages"
            )
    elif repair:
        connection.execute("INSERT INTO messages_fts(messages_fts) VALUES('rebuild')")
        if with_trigram:
            connection.execute(
                "INSERT INTO messages_fts_trigram(messages_fts_trigram) VALUES('rebuild')"
            )
        connection.execute("DELETE FROM state_meta WHERE key IN (?, ?)", _REBUILD_KEYS)
    if not legacy:
        _cjk_without_tokenizer(connection)
    _narrow_update_triggers(connection)


def _cjk_without_tokenizer(connection: sqlite3.Connection) -> None:
    """A process that cannot load ``cjk_unicode61``: if the cjk index has live
    triggers, mark it stale in state_meta, then drop them, so message INSERTs
    stop failing inside the trigger. The table itself stays."""
    if not _exists(connection, "table", "messages_fts_cjk"):
        return
    live = [name for name in CJK_TRIGGER_NAMES if _exists(connection, "trigger", name)]
    if not live:
        return
    _set_meta(connection, CJK_STALE_KEY, "1")
    for name in live:
        connection.execute(f"DROP TRIGGER IF EXISTS {name}")


def _narrow_update_triggers(connection: sqlite3.Connection) -> None:
    """v25 drops ``AFTER UPDATE ON messages`` FTS triggers (v10/v11's, ours) and
    re-runs the layout's scripts, which put its ``AFTER UPDATE OF`` ones in
    their place. On a legacy layout the new trigger is the inline shape
    (DELETE by rowid, INSERT of the joined text) whatever the table is."""
    legacy = has_legacy_fts(connection)
    names = ["messages_fts_update", "messages_fts_trigram_update"]
    if not legacy:
        names.append("messages_fts_cjk_update")
    broad = [n for n in names if _is_broad_update(_sql_of(connection, "trigger", n))]
    if not broad:
        return
    for name in broad:
        connection.execute(f"DROP TRIGGER IF EXISTS {name}")
    for table, script in _legacy_scripts() if legacy else _v23_scripts():
        _ensure_fts(connection, table, script)
    if "messages_fts_cjk_update" in broad:
        # This process cannot recreate it: the cjk index goes stale, triggerless.
        _cjk_without_tokenizer(connection)
        _set_meta(connection, CJK_STALE_KEY, "1")


def _v25_data_steps(connection: sqlite3.Connection, current: int) -> None:
    """v25's version-gated row migrations for a file below 25."""
    if current < 16:
        _tag_delegates(connection)
    # current < 18: backfill from $HERMES_HOME/sessions/sessions.json (absent here).
    if current < 20:
        _seed_model_usage(connection)
    if current < 23 and has_legacy_fts(connection):
        _set_meta(connection, "fts_optimize_available", "1")
    if current < 25:
        _dedupe_system_prompts(connection)


def _tag_delegates(connection: sqlite3.Connection) -> None:
    """v16: mark subagent children (not a branch, parent not ended by
    compression) and small orphaned tool-using roots in ``model_config``."""
    config = "COALESCE(model_config, '{}')"
    branch = (
        "json_extract(COALESCE(sessions.model_config, '{}'), '$._branched_from') IS NOT NULL "
        "OR EXISTS (SELECT 1 FROM sessions p WHERE p.id = sessions.parent_session_id "
        "AND p.end_reason = 'branched' AND sessions.started_at >= p.ended_at)"
    )
    compression = (
        "EXISTS (SELECT 1 FROM sessions p WHERE p.id = sessions.parent_session_id "
        "AND p.end_reason = 'compression')"
    )
    try:
        connection.execute(
            f"UPDATE sessions SET model_config = json_set({config}, '$._delegate_from', "
            f"parent_session_id) WHERE parent_session_id IS NOT NULL "
            f"AND json_extract({config}, '$._delegate_from') IS NULL "
            f"AND NOT ({branch}) AND NOT ({compression})"
        )
        connection.execute(
            f"UPDATE sessions SET model_config = json_set({config}, '$._delegate_from', "
            f"'__orphaned__') WHERE parent_session_id IS NULL "
            f"AND json_extract({config}, '$._delegate_from') IS NULL "
            f"AND json_extract({config}, '$._branched_from') IS NULL "
            "AND title IS NULL AND message_count <= 25 "
            "AND EXISTS (SELECT 1 FROM messages m WHERE m.session_id = sessions.id "
            "AND m.role = 'tool') "
            "AND NOT EXISTS (SELECT 1 FROM sessions c WHERE c.parent_session_id = sessions.id)"
        )
    except sqlite3.OperationalError:
        pass  # e.g. a model_config that is not JSON: upstream skips the step


_USAGE_COUNTERS = (
    "api_call_count",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
    "estimated_cost_usd",
    "actual_cost_usd",
)


def _seed_model_usage(connection: sqlite3.Connection) -> None:
    """v20: one usage row per session that has token totals, from those totals."""
    counters = ", ".join(f"COALESCE({c}, 0)" for c in _USAGE_COUNTERS)
    tokens = " + ".join(f"COALESCE({c}, 0)" for c in _USAGE_COUNTERS[1:6])
    with suppress(sqlite3.OperationalError):
        connection.execute(
            "INSERT OR IGNORE INTO session_model_usage (session_id, model, billing_provider, "
            f"billing_base_url, billing_mode, {', '.join(_USAGE_COUNTERS)}, cost_status, "
            "cost_source, first_seen, last_seen) "
            "SELECT id, COALESCE(model, 'unknown'), COALESCE(billing_provider, ''), "
            "COALESCE(billing_base_url, ''), COALESCE(billing_mode, ''), "
            f"{counters}, cost_status, cost_source, started_at, "
            f"COALESCE(ended_at, started_at) FROM sessions WHERE {tokens} > 0"
        )


def system_prompt_hash(prompt: str) -> str:
    """v25 keys ``system_prompts`` by the SHA-256 hex digest of the UTF-8 prompt."""
    return hashlib.sha256(prompt.encode("utf-8")).hexdigest()


def _store_prompt(connection: sqlite3.Connection, prompt: str | None) -> str | None:
    if prompt is None:
        return None
    digest = system_prompt_hash(prompt)
    connection.execute(
        "INSERT OR IGNORE INTO system_prompts (hash, prompt) VALUES (?, ?)", (digest, prompt)
    )
    return digest


def _dedupe_system_prompts(connection: sqlite3.Connection) -> None:
    """v25's step: move every inline prompt into ``system_prompts`` and clear it."""
    rows = connection.execute(
        "SELECT id, system_prompt FROM sessions WHERE system_prompt IS NOT NULL"
    ).fetchall()
    for session_id, prompt in rows:
        digest = _store_prompt(connection, prompt)
        connection.execute(
            "UPDATE sessions SET system_prompt_hash = ?, system_prompt = NULL WHERE id = ?",
            (digest, session_id),
        )


def _v23_layout_complete(connection: sqlite3.Connection) -> bool:
    """When v25 stamps ``fts_storage_version = 1``: a v23 layout with no pending
    backfill, no demoted tables left and an index that is not empty while
    messages has rows."""
    if has_legacy_fts(connection):
        return False
    if connection.execute(
        "SELECT 1 FROM state_meta WHERE key = 'fts_rebuild_high_water'"
    ).fetchone():
        return False
    if connection.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name LIKE 'fts\\_v22\\_trash\\_%' "
        "ESCAPE '\\'"
    ).fetchone():
        return False
    try:
        has_rows = connection.execute("SELECT EXISTS(SELECT 1 FROM messages)").fetchone()[0]
        indexed = connection.execute(
            "SELECT EXISTS(SELECT 1 FROM messages_fts_docsize)"
        ).fetchone()[0]
    except sqlite3.OperationalError:
        return True
    return not (has_rows and not indexed)


def _open_v25(connection: sqlite3.Connection) -> None:
    script = schema_script_v25()
    connection.executescript(script)
    _reconcile(connection, script)
    for name, target, where in V25_LATE_INDEXES:
        connection.execute(_index(name, target, where))
    connection.execute("UPDATE messages SET active = 1 WHERE active IS NULL")
    current = _stored_version(connection)
    if current is None:
        connection.execute("INSERT INTO schema_version (version) VALUES (25)")
    else:
        _v25_data_steps(connection, current)
        if _v23_layout_complete(connection):
            _set_meta(connection, "fts_storage_version", "1")
        if current < 25:
            _set_version(connection, 25)
    _title_index_v25(connection)
    _v25_ensure_fts(connection)


def upstream_open(path: Path, version: int) -> None:
    """Do to ``path`` what opening it with upstream ``version`` does.

    Works on any file: a fresh path (upstream creates it), one of ours (the
    document's v6 tables, our trigram index, an ``alembic_version`` table that
    no upstream version touches), or one of upstream's own older files. A
    file whose schema_version is above ``version`` is never lowered.
    """
    if version not in UPSTREAM_VERSIONS:
        raise ValueError(f"upstream version must be one of {UPSTREAM_VERSIONS}, got {version}")
    with _connection(path) as connection:
        _journal_mode(connection, version)
        if version <= 9:
            _open_v7_to_v9(connection, version)
        elif version <= 11:
            _open_v10_v11(connection, version)
        else:
            _open_v25(connection)


# ---------------------------------------------------------------------------
# Upstream's writes.
# ---------------------------------------------------------------------------


def upstream_create_session(
    path: Path,
    version: int,
    session_id: str,
    source: str,
    *,
    model: str | None = None,
    model_config: dict[str, Any] | None = None,
    system_prompt: str | None = None,
    user_id: str | None = None,
    parent_session_id: str | None = None,
    clock: Clock = DEFAULT_CLOCK,
) -> None:
    """``create_session`` of ``version``: v7..v11 ``INSERT OR IGNORE`` with the
    prompt inline; v25 stores the prompt in ``system_prompts`` (NULL inline),
    fills still-NULL fields on an existing id, drops prompts no session uses,
    and lets a child inherit its parent's working directory and profile (and
    routing columns when the parent ended by compression)."""
    config = json.dumps(model_config) if model_config else None
    with _write(path) as connection:
        if version < 25:
            connection.execute(
                "INSERT OR IGNORE INTO sessions (id, source, user_id, model, model_config, "
                "system_prompt, parent_session_id, started_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    session_id,
                    source,
                    user_id,
                    model,
                    config,
                    system_prompt,
                    parent_session_id,
                    clock(),
                ),
            )
            return
        _insert_session_v25(
            connection,
            session_id,
            source,
            model,
            config,
            system_prompt,
            user_id,
            parent_session_id,
            clock(),
        )


_INHERITED_FROM_PARENT = ("cwd", "git_repo_root", "git_branch", "profile_name")
_INHERITED_ON_COMPRESSION = (
    "user_id",
    "session_key",
    "chat_id",
    "chat_type",
    "thread_id",
    "display_name",
    "origin_json",
)


def _from_parent(columns: Sequence[str]) -> str:
    return ", ".join(
        f"{c} = COALESCE(sessions.{c}, (SELECT p.{c} FROM sessions p "
        f"WHERE p.id = sessions.parent_session_id))"
        for c in columns
    )


def _insert_session_v25(
    connection: sqlite3.Connection,
    session_id: str,
    source: str,
    model: str | None,
    config: str | None,
    system_prompt: str | None,
    user_id: str | None,
    parent_session_id: str | None,
    started_at: float,
) -> None:
    digest = _store_prompt(connection, system_prompt)
    connection.execute(
        "INSERT INTO sessions (id, source, user_id, model, model_config, system_prompt, "
        "system_prompt_hash, parent_session_id, started_at) VALUES (?, ?, ?, ?, ?, NULL, ?, ?, ?) "
        "ON CONFLICT(id) DO UPDATE SET model = COALESCE(sessions.model, excluded.model), "
        "model_config = COALESCE(sessions.model_config, excluded.model_config), "
        "system_prompt_hash = COALESCE(sessions.system_prompt_hash, excluded.system_prompt_hash), "
        "system_prompt = CASE WHEN sessions.system_prompt_hash IS NULL "
        "AND excluded.system_prompt_hash IS NOT NULL THEN NULL ELSE sessions.system_prompt END, "
        "parent_session_id = COALESCE(sessions.parent_session_id, excluded.parent_session_id)",
        (session_id, source, user_id, model, config, digest, parent_session_id, started_at),
    )
    if digest is not None:
        connection.execute(
            "DELETE FROM system_prompts WHERE NOT EXISTS (SELECT 1 FROM sessions "
            "WHERE sessions.system_prompt_hash = system_prompts.hash)"
        )
    if parent_session_id:
        connection.execute(
            f"UPDATE sessions SET {_from_parent(_INHERITED_FROM_PARENT)} "
            "WHERE id = ? AND parent_session_id IS NOT NULL",
            (session_id,),
        )
        connection.execute(
            f"UPDATE sessions SET {_from_parent(_INHERITED_ON_COMPRESSION)} "
            "WHERE id = ? AND parent_session_id IS NOT NULL AND EXISTS (SELECT 1 FROM sessions p "
            "WHERE p.id = sessions.parent_session_id AND p.end_reason = 'compression')",
            (session_id,),
        )


class CompressionClosedError(RuntimeError):
    """v25 refuses to append to a session that ended by compression."""


def _message_columns(version: int) -> tuple[str, ...]:
    """The INSERT column list of ``append_message`` in ``version``."""
    base = (
        "session_id", "role", "content", "tool_call_id", "tool_calls", "tool_name",
        "timestamp", "token_count", "finish_reason", "reasoning", "reasoning_content",
        "reasoning_details", "codex_reasoning_items",
    )  # fmt: skip
    if version < 9:
        return base
    if version < 25:
        return (*base, "codex_message_items")
    return (
        "session_id", "role", "content", "tool_call_id", "tool_calls", "tool_name",
        "effect_disposition", "timestamp", "token_count", "finish_reason", "reasoning",
        "reasoning_content", "reasoning_details", "codex_reasoning_items",
        "codex_message_items", "platform_message_id", "observed", "active", "api_content",
        "display_kind", "display_metadata",
    )  # fmt: skip


def upstream_append_message(
    path: Path,
    version: int,
    session_id: str,
    role: str,
    content: str | None = None,
    *,
    tool_name: str | None = None,
    tool_calls: Any = None,
    tool_call_id: str | None = None,
    token_count: int | None = None,
    finish_reason: str | None = None,
    reasoning: str | None = None,
    timestamp: float | None = None,
    clock: Clock = DEFAULT_CLOCK,
) -> int:
    """``append_message`` of ``version``; returns the new id.

    ``tool_calls`` is JSON-encoded when truthy (v25 first decodes a JSON
    string, v7..v11 would encode it again); v25 writes ``observed = 0`` and
    ``active = 1`` explicitly. ``message_count`` goes up by one and
    ``tool_call_count`` by the number of calls (a non-list counts as one).
    """
    if version >= 25 and isinstance(tool_calls, str):
        try:
            tool_calls = json.loads(tool_calls)
        except ValueError:
            tool_calls = []
    calls = json.dumps(tool_calls) if tool_calls else None
    n_calls = 0 if tool_calls is None else (len(tool_calls) if isinstance(tool_calls, list) else 1)
    values: dict[str, Any] = {
        "session_id": session_id,
        "role": role,
        "content": content,
        "tool_call_id": tool_call_id,
        "tool_calls": calls,
        "tool_name": tool_name,
        "timestamp": clock() if timestamp is None else timestamp,
        "token_count": token_count,
        "finish_reason": finish_reason,
        "reasoning": reasoning,
        "observed": 0,
        "active": 1,
    }
    columns = _message_columns(version)
    with _write(path) as connection:
        if version >= 25:
            _admit_append(connection, session_id, values["timestamp"])
        cursor = connection.execute(
            f"INSERT INTO messages ({', '.join(columns)}) "
            f"VALUES ({', '.join('?' for _ in columns)})",
            tuple(values.get(c) for c in columns),
        )
        connection.execute(
            "UPDATE sessions SET message_count = message_count + 1, "
            "tool_call_count = tool_call_count + ? WHERE id = ?",
            (n_calls, session_id),
        )
        return int(cursor.lastrowid or 0)


def _admit_append(connection: sqlite3.Connection, session_id: str, now: float) -> None:
    """v25's guards: no append under another writer's compression lock, none to
    a session that ended by compression."""
    if connection.execute(
        "SELECT 1 FROM compression_locks WHERE session_id = ? AND expires_at > ?",
        (session_id, now),
    ).fetchone():
        raise CompressionClosedError(f"session {session_id!r} is being compressed")
    row = connection.execute(
        "SELECT ended_at, end_reason FROM sessions WHERE id = ?", (session_id,)
    ).fetchone()
    if row is not None and row[0] is not None and row[1] == "compression":
        raise CompressionClosedError(f"session {session_id!r} ended by compression")


def upstream_end_session(
    path: Path, version: int, session_id: str, reason: str, *, clock: Clock = DEFAULT_CLOCK
) -> None:
    """``end_session`` (every version here): the first end reason wins."""
    with _write(path) as connection:
        connection.execute(
            "UPDATE sessions SET ended_at = ?, end_reason = ? WHERE id = ? AND ended_at IS NULL",
            (clock(), reason, session_id),
        )


def upstream_update_token_counts(
    path: Path,
    version: int,
    session_id: str,
    *,
    input_tokens: int = 0,
    output_tokens: int = 0,
    model: str | None = None,
    billing_provider: str | None = None,
    estimated_cost_usd: float | None = None,
    api_call_count: int = 0,
    clock: Clock = DEFAULT_CLOCK,
) -> None:
    """The incremental ``update_token_counts`` of ``version``.

    v8+ also count API calls. v25 first upserts the session row (source
    ``unknown`` if it was missing), then adds the same deltas to the
    ``session_model_usage`` row of the call's model (task '').
    """
    if version >= 25:
        with _write(path) as connection:
            _insert_session_v25(
                connection, session_id, "unknown", model, None, None, None, None, clock()
            )
    accounted = bool(input_tokens or output_tokens or api_call_count or estimated_cost_usd)
    if version >= 25 and not accounted:
        model = billing_provider = None
    api = ", api_call_count = COALESCE(api_call_count, 0) + ?" if version >= 8 else ""
    sql = (
        "UPDATE sessions SET input_tokens = input_tokens + ?, output_tokens = output_tokens + ?, "
        "estimated_cost_usd = COALESCE(estimated_cost_usd, 0) + COALESCE(?, 0), "
        "billing_provider = COALESCE(billing_provider, ?), model = COALESCE(model, ?)"
        f"{api} WHERE id = ?"
    )
    params: list[Any] = [input_tokens, output_tokens, estimated_cost_usd, billing_provider, model]
    if version >= 8:
        params.append(api_call_count)
    params.append(session_id)
    with _write(path) as connection:
        if version >= 25:
            _first_route(connection, session_id, model, billing_provider, accounted)
        connection.execute(sql, params)
        if version >= 25 and accounted:
            _record_usage(
                connection, session_id, model, billing_provider, input_tokens,
                output_tokens, estimated_cost_usd, api_call_count, clock(),
            )  # fmt: skip


def _first_route(
    connection: sqlite3.Connection,
    session_id: str,
    model: str | None,
    provider: str | None,
    accounted: bool,
) -> None:
    """v25: before any API call is counted, the first accounted call's model
    and provider replace the ones the session was created with."""
    row = connection.execute(
        "SELECT model, billing_provider, api_call_count FROM sessions WHERE id = ?", (session_id,)
    ).fetchone()
    if row is None or (row[2] or 0) != 0 or not (accounted and model and provider):
        return
    if row[0] != model or row[1] != provider:
        connection.execute(
            "UPDATE sessions SET model = ?, billing_provider = ?, billing_base_url = NULL, "
            "billing_mode = NULL WHERE id = ?",
            (model, provider, session_id),
        )


def _record_usage(
    connection: sqlite3.Connection,
    session_id: str,
    model: str | None,
    provider: str | None,
    input_tokens: int,
    output_tokens: int,
    cost: float | None,
    api_calls: int,
    now: float,
) -> None:
    row = connection.execute(
        "SELECT model, billing_provider, billing_base_url, billing_mode FROM sessions WHERE id = ?",
        (session_id,),
    ).fetchone()
    session = tuple(row) if row is not None else (None, None, None, None)
    key = (
        model or session[0] or "unknown",
        provider or session[1] or "",
        session[2] or "",
        session[3] or "",
    )
    connection.execute(
        "INSERT INTO session_model_usage (session_id, model, billing_provider, billing_base_url, "
        "billing_mode, task, api_call_count, input_tokens, output_tokens, cache_read_tokens, "
        "cache_write_tokens, reasoning_tokens, estimated_cost_usd, actual_cost_usd, cost_status, "
        "cost_source, first_seen, last_seen) VALUES (?, ?, ?, ?, ?, '', ?, ?, ?, 0, 0, 0, ?, 0.0, "
        "NULL, NULL, ?, ?) ON CONFLICT(session_id, model, billing_provider, billing_base_url, "
        "billing_mode, task) DO UPDATE SET "
        "api_call_count = api_call_count + excluded.api_call_count, "
        "input_tokens = input_tokens + excluded.input_tokens, "
        "output_tokens = output_tokens + excluded.output_tokens, "
        "estimated_cost_usd = estimated_cost_usd + excluded.estimated_cost_usd, "
        "last_seen = excluded.last_seen",
        (session_id, *key, api_calls, input_tokens, output_tokens, float(cost or 0.0), now, now),
    )


# ---------------------------------------------------------------------------
# Upstream's reads.
# ---------------------------------------------------------------------------


def upstream_get_messages(path: Path, version: int, session_id: str) -> list[dict[str, Any]]:
    """``get_messages``: v7..v11 every row by timestamp; v25 active rows by id.
    ``tool_calls`` decoded from JSON."""
    order = "ORDER BY id" if version >= 25 else "ORDER BY timestamp, id"
    active = " AND active = 1" if version >= 25 else ""
    with _connection(path) as connection:
        rows = connection.execute(
            f"SELECT * FROM messages WHERE session_id = ?{active} {order}", (session_id,)
        ).fetchall()
    result = []
    for row in rows:
        message = dict(row)
        if message.get("tool_calls"):
            message["tool_calls"] = json.loads(message["tool_calls"])
        result.append(message)
    return result


def _is_cjk(char: str) -> bool:
    cp = ord(char)
    return (
        0x4E00 <= cp <= 0x9FFF
        or 0x3400 <= cp <= 0x4DBF
        or 0x20000 <= cp <= 0x2A6DF
        or 0x3000 <= cp <= 0x303F
        or 0x3040 <= cp <= 0x309F
        or 0x30A0 <= cp <= 0x30FF
        or 0xAC00 <= cp <= 0xD7AF
    )


def _cjk_count(text: str) -> int:
    return sum(1 for ch in text if _is_cjk(ch))


_OPERATORS = {"AND", "OR", "NOT"}


def _terms(query: str) -> list[str]:
    return [t for t in query.split() if t.upper() not in _OPERATORS]


def _quoted(query: str) -> str:
    return " ".join(
        t if t.upper() in _OPERATORS else '"' + t.replace('"', '""') + '"' for t in query.split()
    )


def upstream_search(path: Path, version: int, query: str) -> list[int]:
    """Ids ``search_messages(query)`` of ``version`` returns, sorted.

    Enough of each version's routing for plain words and CJK terms (its query
    sanitizer is not reproduced: pass plain terms):
    * v7..v9: ``messages_fts``; a CJK query that finds nothing there falls
      back to ``content LIKE``.
    * v10/v11: a query with 3+ CJK characters goes to ``messages_fts_trigram``
      (terms quoted), a shorter CJK one to LIKE over content, tool name and
      tool calls; other queries to ``messages_fts``.
    * v25: as v11 but per term (any CJK term under 3 characters means LIKE),
      only ``active = 1 OR compacted = 1`` rows, and a Latin query that
      ``messages_fts`` misses retried on the trigram index when every term
      has 3+ characters. (The cjk index is never readable here.)
    """
    with _connection(path) as connection:
        if _cjk_count(query):
            return sorted(_cjk_search(connection, version, query))
        hits = _fts_ids(connection, "messages_fts", query, version)
        if not hits and version >= 25 and all(len(t) >= 3 for t in _terms(query)):
            hits = _fts_ids(connection, "messages_fts_trigram", _quoted(query), version)
        return sorted(hits)


def _visible(version: int) -> str:
    return " AND (m.active = 1 OR m.compacted = 1)" if version >= 25 else ""


def _fts_ids(connection: sqlite3.Connection, table: str, match: str, version: int) -> list[int]:
    try:
        rows = connection.execute(
            f"SELECT m.id FROM {table} JOIN messages m ON m.id = {table}.rowid "
            f"JOIN sessions s ON s.id = m.session_id WHERE {table} MATCH ?{_visible(version)}",
            (match,),
        ).fetchall()
    except sqlite3.OperationalError:
        return []
    return [row[0] for row in rows]


def _cjk_search(connection: sqlite3.Connection, version: int, query: str) -> list[int]:
    raw = query.strip('"').strip()
    if version < 10:
        hits = _fts_ids(connection, "messages_fts", query, version)
        if hits:
            return hits
        return _like_ids(connection, [raw], ("content",), version)
    terms = _terms(raw) or [raw]
    if version >= 25:
        trigram = all(_cjk_count(t) >= 3 for t in terms if _cjk_count(t))
    else:
        trigram = _cjk_count(raw) >= 3
    if trigram and _fts_readable(connection, "messages_fts_trigram"):
        return _fts_ids(connection, "messages_fts_trigram", _quoted(raw), version)
    like_terms = terms if version >= 25 else [raw]
    return _like_ids(connection, like_terms, ("content", "tool_name", "tool_calls"), version)


def _like_ids(
    connection: sqlite3.Connection, terms: Sequence[str], columns: Sequence[str], version: int
) -> list[int]:
    clauses, params = [], []
    for term in terms:
        escaped = term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        if version < 10:
            escaped = term  # v7..v9: no ESCAPE clause, the term as typed
        ors = " OR ".join(
            f"m.{c} LIKE ?" + (" ESCAPE '\\'" if version >= 10 else "") for c in columns
        )
        clauses.append(f"({ors})")
        params += [f"%{escaped}%"] * len(columns)
    rows = connection.execute(
        "SELECT m.id FROM messages m JOIN sessions s ON s.id = m.session_id "
        f"WHERE ({' OR '.join(clauses)}){_visible(version)}",
        params,
    ).fetchall()
    return [row[0] for row in rows]


# ---------------------------------------------------------------------------
# Checks and comparison.
# ---------------------------------------------------------------------------


def fts_tables(connection: sqlite3.Connection) -> list[str]:
    """Every FTS5 table of the file (virtual tables; shadow tables excluded)."""
    rows = connection.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' "
        "AND sql LIKE 'CREATE VIRTUAL TABLE%' ORDER BY name"
    ).fetchall()
    return [row[0] for row in rows]


UNLOADABLE = "unloadable"


def fts_check(path: Path) -> dict[str, Any]:
    """FTS5 ``integrity-check`` with ``rank = 1`` on every FTS table, plus
    ``PRAGMA integrity_check``.

    The ``rank = 1`` form also compares an external-content index with its
    content table (on SQLite 3.40 the plain form does not). Each FTS table
    maps to ``"ok"``, to ``"unloadable: ..."`` when this process lacks its
    tokenizer (a cjk index made elsewhere), or to the error; the key
    ``integrity_check`` holds the pragma's rows (``["ok"]`` when sound).
    """
    result: dict[str, Any] = {}
    with _connection(path) as connection:
        for table in fts_tables(connection):
            try:
                # A match first: newer SQLite loads a tokenizer only when it tokenizes.
                connection.execute(f"SELECT rowid FROM {table} WHERE {table} MATCH 'a' LIMIT 1")
                connection.execute(
                    f"INSERT INTO {table}({table}, rank) VALUES ('integrity-check', 1)"
                )
                result[table] = "ok"
            except sqlite3.Error as error:
                text = str(error)
                unloadable = "no such tokenizer" in text.lower()
                result[table] = f"{UNLOADABLE}: {text}" if unloadable else text
        result["integrity_check"] = [row[0] for row in connection.execute("PRAGMA integrity_check")]
    return result


def fts_problems(path: Path) -> list[str]:
    """The entries of :func:`fts_check` that are neither ok nor unloadable."""
    problems = []
    for name, value in fts_check(path).items():
        if name == "integrity_check":
            if value != ["ok"]:
                problems.append(f"integrity_check: {value}")
        elif value != "ok" and not str(value).startswith(UNLOADABLE):
            problems.append(f"{name}: {value}")
    return problems


def counter_mismatches(path: Path) -> list[tuple[str, int, int]]:
    """Sessions whose ``message_count`` differs from their rows: (id, stored, real)."""
    with _connection(path) as connection:
        rows = connection.execute(
            "SELECT s.id, COALESCE(s.message_count, 0), "
            "(SELECT COUNT(*) FROM messages m WHERE m.session_id = s.id) FROM sessions s"
        ).fetchall()
    return [(r[0], r[1], r[2]) for r in rows if r[1] != r[2]]


def normalize_sql(sql: str | None) -> str | None:
    """A CREATE statement with whitespace folded and no blanks next to ``(),``."""
    if sql is None:
        return None
    text = " ".join(sql.split())
    for mark in ("(", ")", ","):
        text = text.replace(f" {mark}", mark).replace(f"{mark} ", mark)
    return text


def schema_signature(path: Path) -> dict[str, Any]:
    """What the schema of a file is: every sqlite_master object (type, name,
    table, normalized SQL), ``PRAGMA table_info`` of every ordinary table,
    the schema_version row and the state_meta keys and values."""
    with _connection(path) as connection:
        objects = [
            [row[0], row[1], row[2], normalize_sql(row[3])]
            for row in connection.execute(
                "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name"
            )
        ]
        columns = {}
        for kind, name, _table, sql in objects:
            if kind == "table" and not (sql or "").startswith("CREATE VIRTUAL TABLE"):
                columns[name] = [
                    list(row)[1:] for row in connection.execute(f'PRAGMA table_info("{name}")')
                ]
        meta: dict[str, Any] = {}
        if "state_meta" in columns:
            meta = dict(connection.execute("SELECT key, value FROM state_meta ORDER BY key"))
        version = _stored_version(connection) if "schema_version" in columns else None
    return {"objects": objects, "columns": columns, "schema_version": version, "state_meta": meta}


def fingerprint(signature: dict[str, Any]) -> str:
    """A short stable digest of a :func:`schema_signature`."""
    text = json.dumps(signature, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


_TIME_COLUMNS = {"started_at", "ended_at", "timestamp", "first_seen", "last_seen"}


def data_snapshot(path: Path) -> dict[str, Any]:
    """Rows of the data tables (times left out) and the terms of every
    readable FTS index, for comparing two files that saw the same writes."""
    snapshot: dict[str, Any] = {}
    with _connection(path) as connection:
        tables = {
            row[0]
            for row in connection.execute("SELECT name FROM sqlite_master WHERE type='table'")
        }
        for table in (
            "sessions",
            "messages",
            "system_prompts",
            "session_model_usage",
            "state_meta",
        ):
            if table not in tables:
                continue
            rows = connection.execute(f"SELECT * FROM {table}").fetchall()
            snapshot[table] = sorted(
                json.dumps(
                    {k: v for k, v in dict(r).items() if k not in _TIME_COLUMNS}, sort_keys=True
                )
                for r in rows
            )
        for table in fts_tables(connection):
            snapshot[f"terms:{table}"] = _index_terms(connection, table)
    return snapshot


def _index_terms(connection: sqlite3.Connection, table: str) -> list[Any] | str:
    """(term, rowid, column, offset) of every token in an FTS index, via fts5vocab."""
    vocab = f"temp.vocab_{table}"
    try:
        connection.execute(f"CREATE VIRTUAL TABLE {vocab} USING fts5vocab(main, {table}, instance)")
        rows = connection.execute(f"SELECT term, doc, col, offset FROM {vocab}").fetchall()
        return sorted(list(r) for r in rows)
    except sqlite3.OperationalError as error:
        return f"{UNLOADABLE}: {error}"
    finally:
        connection.execute(f"DROP TABLE IF EXISTS {vocab}")


# ---------------------------------------------------------------------------
# The cjk index of a host that had the extension.
# ---------------------------------------------------------------------------


def add_cjk_index(path: Path) -> None:
    """Give a v23-layout file the ``messages_fts_cjk`` index and its triggers
    as upstream 25 creates them where ``cjk_unicode61`` can be loaded.

    No process here can load that tokenizer, so the table is created with
    ``unicode61`` and its stored CREATE is then rewritten to name
    ``cjk_unicode61`` (``PRAGMA writable_schema``). Any later statement that
    touches the table, including a message INSERT through its triggers,
    then fails with "no such tokenizer: cjk_unicode61", as on a host without
    the extension. Call it on a file without messages (an upstream-created
    index on a populated file would also carry backfill markers).
    """
    with _connection(path) as connection:
        connection.executescript(CJK_TABLE_SQL.replace("'cjk_unicode61'", "'unicode61'"))
        connection.executescript(CJK_TRIGGER_SQL)
        connection.execute("DELETE FROM state_meta WHERE key = ?", (CJK_STALE_KEY,))
        cookie = connection.execute("PRAGMA schema_version").fetchone()[0]
        connection.execute("PRAGMA writable_schema = ON")
        connection.execute(
            "UPDATE sqlite_master SET sql = replace(sql, '''unicode61''', '''cjk_unicode61''') "
            "WHERE type = 'table' AND name = 'messages_fts_cjk'"
        )
        connection.execute(f"PRAGMA schema_version = {cookie + 1}")
        connection.execute("PRAGMA writable_schema = OFF")


# ---------------------------------------------------------------------------
# Sample data and whole files.
# ---------------------------------------------------------------------------

SAMPLE_SESSIONS: tuple[dict[str, Any], ...] = (
    {
        "session_id": "up_root",
        "source": "cli",
        "model": "anthropic/claude-sonnet-4.6",
        "model_config": {"temperature": 0.2},
        "system_prompt": "You are Hermes.",
        "user_id": "user_1",
    },
    {
        "session_id": "up_child",
        "source": "telegram",
        "model": "anthropic/claude-sonnet-4.6",
        "system_prompt": "You are Hermes.",
        "parent_session_id": "up_root",
    },
    {"session_id": "up_other", "source": "discord"},
)

_CALLS = [
    {
        "id": "call_up_1",
        "type": "function",
        "function": {"name": "terminal", "arguments": '{"cmd": "docker buildx ls"}'},
    }
]

# (session, role, content, extra append_message arguments)
SAMPLE_MESSAGES: tuple[tuple[str, str, str | None, dict[str, Any]], ...] = (
    ("up_root", "user", "Why does the docker deployment fail on arm64?", {}),
    ("up_root", "assistant", None, {"tool_calls": _CALLS, "finish_reason": "tool_calls"}),
    (
        "up_root",
        "tool",
        "builder default: linux/amd64 only; qemu emulation missing",
        {"tool_name": "terminal", "tool_call_id": "call_up_1"},
    ),
    ("up_child", "user", "修改youer服务端的计划", {}),
    ("up_child", "assistant", "聊天记录记忆断裂问题已经修复", {"finish_reason": "stop"}),
    ("up_other", "user", "unrelated discord chatter about marmalade", {}),
)

SAMPLE_SEARCHES = {
    # query -> sessions of the sample messages every version finds
    "docker": {"up_root"},
    "qemu": {"up_root"},
    "marmalade": {"up_other"},
    "服务端": {"up_child"},
    "记忆断裂": {"up_child"},
}


def fill_upstream_sample(path: Path, version: int, *, clock: Clock | None = None) -> None:
    """Write the sample sessions, messages and token counts as ``version`` does.

    Root and child form a compression lineage (the root ends with
    ``compression`` after its turn, as the agent splits a session).
    """
    tick = clock or Clock()
    for session in SAMPLE_SESSIONS:
        upstream_create_session(path, version, clock=tick, **session)
    for session_id, role, content, extra in SAMPLE_MESSAGES:
        upstream_append_message(path, version, session_id, role, content, clock=tick, **extra)
    upstream_update_token_counts(
        path, version, "up_root", input_tokens=1200, output_tokens=340,
        model="anthropic/claude-sonnet-4.6", billing_provider="openrouter",
        estimated_cost_usd=0.0421, api_call_count=2, clock=tick,
    )  # fmt: skip
    upstream_update_token_counts(
        path, version, "up_child", input_tokens=800, output_tokens=120,
        model="anthropic/claude-sonnet-4.6", api_call_count=1, clock=tick,
    )  # fmt: skip
    upstream_end_session(path, version, "up_root", "compression", clock=tick)


def build_upstream_db(
    path: Path, version: int, *, seed: bool = True, cjk_index: bool = False
) -> Path:
    """A state.db created fresh by upstream ``version``, with the sample data if ``seed``.

    ``cjk_index`` (v25 only): the file was made on a host that could load
    ``cjk_unicode61``, so it carries ``messages_fts_cjk`` with live triggers
    (see :func:`add_cjk_index`); seeding then is impossible here and is refused.
    """
    if path.exists():
        raise FileExistsError(path)
    upstream_open(path, version)
    if cjk_index:
        if version != 25 or seed:
            raise ValueError("a cjk index exists only on v25 files, and none can be seeded here")
        add_cjk_index(path)
    if seed:
        fill_upstream_sample(path, version)
    return path


STORE_CJK_MESSAGES = (
    ("sess_other", "user", "我们讨论服务端的部署"),
    ("sess_other", "assistant", "记忆断裂的问题已经解决"),
)


def build_store_db(path: Path, *, schema_version: int = 7, alembic_revision: str = "0007") -> Path:
    """A file as hermes_store leaves it: the document's tables grown by revisions
    0001..0006 (so title before the billing columns), our trigram index
    (revision 0007: external content over ``messages.content`` with broad
    triggers named like upstream's), an ``alembic_version`` row and the given
    ``schema_version`` (7 before issue 15, 6 once our revisions stop claiming
    upstream's numbers). Holds the legacy sample data plus two Chinese rows."""
    build_legacy_db(path, 6, created_at=1)
    with _connection(path) as connection:
        connection.executescript(STORE_TRIGRAM_SQL)
        connection.execute(
            "INSERT INTO messages_fts_trigram(messages_fts_trigram) VALUES ('rebuild')"
        )
        connection.execute(
            "CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL, "
            "CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num))"
        )
        connection.execute("INSERT INTO alembic_version VALUES (?)", (alembic_revision,))
        _set_version(connection, schema_version)
        for n, (session_id, role, content) in enumerate(STORE_CJK_MESSAGES):
            connection.execute(
                "INSERT INTO messages (session_id, role, content, timestamp) VALUES (?, ?, ?, ?)",
                (session_id, role, content, 1_700_100_000.0 + n),
            )
            connection.execute(
                "UPDATE sessions SET message_count = message_count + 1 WHERE id = ?", (session_id,)
            )
    return path


def copy_db(source: Path, target: Path) -> Path:
    """Copy a closed state.db (no -wal/-shm left behind by these helpers)."""
    shutil.copyfile(source, target)
    return target
