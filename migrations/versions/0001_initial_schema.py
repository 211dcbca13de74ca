"""Schema version 1: sessions, messages, the FTS5 index and its three triggers.

The DDL is the old code's at version 1, verbatim (``schema_version`` without
a primary key, as the old code made it), so a database built here and one
built by the old ``sqlite3`` store are the same file, and the later revisions
apply to both alike. Raw SQL rather than ``op.create_table``: Alembic has no
notion of FTS5 virtual tables, and SQLAlchemy would spell types and
constraints differently from the documented DDL.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

from alembic import op

from hermes_store.migration_ops import is_sqlite, set_schema_version

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

SCHEMA_VERSION_TABLE = """
CREATE TABLE IF NOT EXISTS schema_version (
    version INTEGER NOT NULL
)
"""

SESSIONS = """
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
    FOREIGN KEY (parent_session_id) REFERENCES sessions(id)
)
"""

MESSAGES = """
CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL REFERENCES sessions(id),
    role TEXT NOT NULL,
    content TEXT,
    tool_call_id TEXT,
    tool_calls TEXT,
    tool_name TEXT,
    timestamp REAL NOT NULL,
    token_count INTEGER
)
"""

INDEXES = (
    "CREATE INDEX IF NOT EXISTS idx_sessions_source ON sessions(source)",
    "CREATE INDEX IF NOT EXISTS idx_sessions_parent ON sessions(parent_session_id)",
    "CREATE INDEX IF NOT EXISTS idx_sessions_started ON sessions(started_at DESC)",
    "CREATE INDEX IF NOT EXISTS idx_messages_session ON messages(session_id, timestamp)",
)

FTS_TABLE = """
CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts USING fts5(
    content,
    content=messages,
    content_rowid=id
)
"""

FTS_TRIGGERS = (
    """
CREATE TRIGGER IF NOT EXISTS messages_fts_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content);
END
""",
    """
CREATE TRIGGER IF NOT EXISTS messages_fts_delete AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content)
        VALUES('delete', old.id, old.content);
END
""",
    """
CREATE TRIGGER IF NOT EXISTS messages_fts_update AFTER UPDATE ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content)
        VALUES('delete', old.id, old.content);
    INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content);
END
""",
)


def upgrade() -> None:
    op.execute(SCHEMA_VERSION_TABLE)
    op.execute(SESSIONS)
    op.execute(MESSAGES)
    for index in INDEXES:
        op.execute(index)
    if is_sqlite():
        op.execute(FTS_TABLE)
        for trigger in FTS_TRIGGERS:
            op.execute(trigger)
    # FTS5 and its triggers exist only in SQLite. Other dialects skip them for
    # now; the PostgreSQL branch will bring its own search index (and its own
    # table DDL: AUTOINCREMENT above is SQLite's spelling).
    set_schema_version(1)


def downgrade() -> None:
    if is_sqlite():
        for name in ("messages_fts_update", "messages_fts_delete", "messages_fts_insert"):
            op.execute(f"DROP TRIGGER IF EXISTS {name}")
        op.execute("DROP TABLE IF EXISTS messages_fts")
    op.execute("DROP TABLE IF EXISTS messages")
    op.execute("DROP TABLE IF EXISTS sessions")
    op.execute("DROP TABLE IF EXISTS schema_version")
