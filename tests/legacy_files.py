"""state.db files as the old ``sqlite3`` code left them, at every schema version 1..6.

The old store ran ``CREATE TABLE IF NOT EXISTS`` with the DDL of its own
version, inserted its version number into ``schema_version`` and created the
FTS5 table and triggers. ``DOCUMENTED_V6_DDL`` is the design document's DDL
verbatim (title last in sessions), what a fresh file of the v6 code holds.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

SESSION_COLUMNS = {
    1: [
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
    ],
    3: ["title TEXT"],
    5: [
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
    ],
}
MESSAGE_COLUMNS = {
    1: [
        "id INTEGER PRIMARY KEY AUTOINCREMENT",
        "session_id TEXT NOT NULL REFERENCES sessions(id)",
        "role TEXT NOT NULL",
        "content TEXT",
        "tool_call_id TEXT",
        "tool_calls TEXT",
        "tool_name TEXT",
        "timestamp REAL NOT NULL",
        "token_count INTEGER",
    ],
    2: ["finish_reason TEXT"],
    6: ["reasoning TEXT", "reasoning_details TEXT", "codex_reasoning_items TEXT"],
}

FTS_DDL = """
CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts USING fts5(
    content,
    content=messages,
    content_rowid=id
);

CREATE TRIGGER IF NOT EXISTS messages_fts_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content);
END;

CREATE TRIGGER IF NOT EXISTS messages_fts_delete AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content)
        VALUES('delete', old.id, old.content);
END;

CREATE TRIGGER IF NOT EXISTS messages_fts_update AFTER UPDATE ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content)
        VALUES('delete', old.id, old.content);
    INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content);
END;
"""

DOCUMENTED_V6_DDL = (
    """
CREATE TABLE IF NOT EXISTS schema_version (
    version INTEGER NOT NULL
);

CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    source TEXT NOT NULL,
    user_id TEXT,
    model TEXT,
    model_config TEXT,
    system_prompt TEXT,
    parent_session_id TEXT,
    started_at REAL NOT NULL,
    ended_at REAL,
    end_reason TEXT,
    message_count INTEGER DEFAULT 0,
    tool_call_count INTEGER DEFAULT 0,
    input_tokens INTEGER DEFAULT 0,
    output_tokens INTEGER DEFAULT 0,
    cache_read_tokens INTEGER DEFAULT 0,
    cache_write_tokens INTEGER DEFAULT 0,
    reasoning_tokens INTEGER DEFAULT 0,
    billing_provider TEXT,
    billing_base_url TEXT,
    billing_mode TEXT,
    estimated_cost_usd REAL,
    actual_cost_usd REAL,
    cost_status TEXT,
    cost_source TEXT,
    pricing_version TEXT,
    title TEXT,
    FOREIGN KEY (parent_session_id) REFERENCES sessions(id)
);

CREATE INDEX IF NOT EXISTS idx_sessions_source ON sessions(source);
CREATE INDEX IF NOT EXISTS idx_sessions_parent ON sessions(parent_session_id);
CREATE INDEX IF NOT EXISTS idx_sessions_started ON sessions(started_at DESC);
CREATE UNIQUE INDEX IF NOT EXISTS idx_sessions_title_unique
    ON sessions(title) WHERE title IS NOT NULL;

CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL REFERENCES sessions(id),
    role TEXT NOT NULL,
    content TEXT,
    tool_call_id TEXT,
    tool_calls TEXT,
    tool_name TEXT,
    timestamp REAL NOT NULL,
    token_count INTEGER,
    finish_reason TEXT,
    reasoning TEXT,
    reasoning_details TEXT,
    codex_reasoning_items TEXT
);

CREATE INDEX IF NOT EXISTS idx_messages_session ON messages(session_id, timestamp);
"""
    + FTS_DDL
)


def _columns(spec: dict[int, list[str]], version: int) -> list[str]:
    return [column for v, columns in sorted(spec.items()) if v <= version for column in columns]


def legacy_ddl(version: int) -> str:
    """The schema script the old code of ``version`` ran on a new file."""
    sessions = ",\n    ".join(
        [
            *_columns(SESSION_COLUMNS, version),
            "FOREIGN KEY (parent_session_id) REFERENCES sessions(id)",
        ]
    )
    messages = ",\n    ".join(_columns(MESSAGE_COLUMNS, version))
    title_index = (
        "CREATE UNIQUE INDEX IF NOT EXISTS idx_sessions_title_unique "
        "ON sessions(title) WHERE title IS NOT NULL;"
        if version >= 4
        else ""
    )
    return f"""
CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS sessions (
    {sessions}
);
CREATE TABLE IF NOT EXISTS messages (
    {messages}
);
CREATE INDEX IF NOT EXISTS idx_sessions_source ON sessions(source);
CREATE INDEX IF NOT EXISTS idx_sessions_parent ON sessions(parent_session_id);
CREATE INDEX IF NOT EXISTS idx_sessions_started ON sessions(started_at DESC);
CREATE INDEX IF NOT EXISTS idx_messages_session ON messages(session_id, timestamp);
{title_index}
{FTS_DDL}
"""


def build_legacy_file(path: Path, version: int) -> dict[str, list[tuple]]:
    """Write an old-code file at ``version`` with a lineage and searchable messages.

    Returns the rows written (sessions and messages as tuples of the v1
    columns plus whatever the version adds that is set here), to compare after
    an upgrade.
    """
    connection = sqlite3.connect(path)
    connection.executescript(DOCUMENTED_V6_DDL if version == 6 else legacy_ddl(version))
    connection.execute("INSERT INTO schema_version (version) VALUES (?)", (version,))
    sessions = [
        ("root", "cli", None, 1000.0, 1010.0),
        ("child", "telegram", "root", 1020.0, None),
        ("grandchild", "telegram", "child", 1030.0, None),
    ]
    connection.executemany(
        "INSERT INTO sessions (id, source, parent_session_id, started_at, ended_at, "
        "message_count, input_tokens) VALUES (?, ?, ?, ?, ?, 2, 100)",
        sessions,
    )
    messages = []
    for n, (session_id, *_rest) in enumerate(sessions):
        messages += [
            (session_id, "user", f"legacy question {n} about kubernetes ingress", 1001.0 + n),
            (session_id, "assistant", f"legacy answer {n} mentioning helm charts", 1002.0 + n),
        ]
    connection.executemany(
        "INSERT INTO messages (session_id, role, content, timestamp) VALUES (?, ?, ?, ?)",
        messages,
    )
    if version >= 2:
        connection.execute("UPDATE messages SET finish_reason = 'stop' WHERE role = 'assistant'")
    if version >= 3:
        connection.execute("UPDATE sessions SET title = 'Legacy ' || id")
    if version >= 5:
        connection.execute("UPDATE sessions SET estimated_cost_usd = 0.25, cache_read_tokens = 7")
    if version >= 6:
        connection.execute("UPDATE messages SET reasoning = 'thought' WHERE role = 'assistant'")
    connection.commit()
    connection.close()
    return {"sessions": sessions, "messages": messages}
