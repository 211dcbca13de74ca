"""state.db files exactly as the old ``sqlite3`` code left them, at schema versions 1..6.

The old store, on opening a file, ran the ``CREATE TABLE IF NOT EXISTS``
script of its own version (``schema_version`` included), inserted its version
number when the table was empty, created the FTS5 table and triggers, and
otherwise walked its migration steps: ``ALTER TABLE ADD COLUMN`` with
"duplicate column" ignored, then ``UPDATE schema_version``. Files in the field
come from both paths: made fresh by some version, or made by an older one and
migrated forward by the old code. :func:`build_legacy_db` makes either, with
nothing but the standard library, so the tests do not trust our own code to
describe what they are testing it against.

At version 6 a fresh file is the design document's DDL verbatim
(:data:`DOCUMENTED_V6_DDL`, ``title`` last in ``sessions``); at versions 3..5
the sessions columns follow the same order (billing columns before title),
since the v6 script grew from those.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hermes_store.backends.sqlite.library import driver as sqlite3

LEGACY_VERSIONS = (1, 2, 3, 4, 5, 6)

# ---------------------------------------------------------------------------
# The design document's DDL (session-storage), verbatim, plus the
# schema_version table it describes ("a single-row table tracking migrations").
# ---------------------------------------------------------------------------
DOCUMENTED_SESSIONS_DDL = """\
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
"""

DOCUMENTED_MESSAGES_DDL = """\
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

DOCUMENTED_FTS_DDL = """\
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

SCHEMA_VERSION_DDL = """\
CREATE TABLE IF NOT EXISTS schema_version (
    version INTEGER NOT NULL
);
"""

DOCUMENTED_V6_DDL = (
    SCHEMA_VERSION_DDL + "\n" + DOCUMENTED_SESSIONS_DDL + "\n" + DOCUMENTED_MESSAGES_DDL
)
"""The documented tables and indexes at version 6 (FTS separately: :data:`DOCUMENTED_FTS_DDL`)."""

# ---------------------------------------------------------------------------
# What each old version added, in the words of its migration step.
# ---------------------------------------------------------------------------
V1_SESSION_COLUMNS = (
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
)
V1_MESSAGE_COLUMNS = (
    "id INTEGER PRIMARY KEY AUTOINCREMENT",
    "session_id TEXT NOT NULL REFERENCES sessions(id)",
    "role TEXT NOT NULL",
    "content TEXT",
    "tool_call_id TEXT",
    "tool_calls TEXT",
    "tool_name TEXT",
    "timestamp REAL NOT NULL",
    "token_count INTEGER",
)
BILLING_COLUMNS = (
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
)
REASONING_COLUMNS = ("reasoning TEXT", "reasoning_details TEXT", "codex_reasoning_items TEXT")
TITLE_INDEX_DDL = (
    "CREATE UNIQUE INDEX IF NOT EXISTS idx_sessions_title_unique "
    "ON sessions(title) WHERE title IS NOT NULL"
)

# version -> (table, column definition) steps, or a bare SQL statement.
MIGRATION_STEPS: dict[int, tuple[tuple[str, str] | str, ...]] = {
    2: (("messages", "finish_reason TEXT"),),
    3: (("sessions", "title TEXT"),),
    4: (TITLE_INDEX_DDL,),
    5: tuple(("sessions", column) for column in BILLING_COLUMNS),
    6: tuple(("messages", column) for column in REASONING_COLUMNS),
}


def _name(column_definition: str) -> str:
    return column_definition.split()[0]


def session_columns(version: int) -> list[str]:
    """Column names of ``sessions`` at ``version``, in the old fresh-file order."""
    names = [_name(c) for c in V1_SESSION_COLUMNS]
    if version >= 5:
        names += [_name(c) for c in BILLING_COLUMNS]
    if version >= 3:
        names.append("title")
    return names


def message_columns(version: int) -> list[str]:
    """Column names of ``messages`` at ``version``."""
    names = [_name(c) for c in V1_MESSAGE_COLUMNS]
    if version >= 2:
        names.append("finish_reason")
    if version >= 6:
        names += [_name(c) for c in REASONING_COLUMNS]
    return names


def fresh_schema_script(version: int) -> str:
    """The ``CREATE ... IF NOT EXISTS`` script the old code of ``version`` ran."""
    if version == 6:
        return DOCUMENTED_V6_DDL
    sessions = list(V1_SESSION_COLUMNS)
    if version >= 5:
        sessions += BILLING_COLUMNS
    if version >= 3:
        sessions.append("title TEXT")
    sessions.append("FOREIGN KEY (parent_session_id) REFERENCES sessions(id)")
    messages = list(V1_MESSAGE_COLUMNS)
    if version >= 2:
        messages.append("finish_reason TEXT")
    body = ",\n    ".join
    title_index = f"{TITLE_INDEX_DDL};\n" if version >= 4 else ""
    return f"""\
{SCHEMA_VERSION_DDL}
CREATE TABLE IF NOT EXISTS sessions (
    {body(sessions)}
);

CREATE INDEX IF NOT EXISTS idx_sessions_source ON sessions(source);
CREATE INDEX IF NOT EXISTS idx_sessions_parent ON sessions(parent_session_id);
CREATE INDEX IF NOT EXISTS idx_sessions_started ON sessions(started_at DESC);
{title_index}
CREATE TABLE IF NOT EXISTS messages (
    {body(messages)}
);

CREATE INDEX IF NOT EXISTS idx_messages_session ON messages(session_id, timestamp);
"""


def old_code_open(path: Path, version: int) -> None:
    """Open ``path`` as the old store of ``version`` did: create or migrate, then FTS.

    Mirrors the old ``_init_schema``: WAL, the version's schema script, the
    version row if missing, else each migration step whose number is above
    the stored version (errors from existing columns swallowed), each step
    followed by its ``UPDATE schema_version``.
    """
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA foreign_keys=ON")
        row = None
        if connection.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'"
        ).fetchone():
            row = connection.execute("SELECT version FROM schema_version LIMIT 1").fetchone()
        if row is None:
            # A new file: the version's whole script (its CREATE INDEX on title
            # would fail on an older file without the column, hence only here).
            connection.executescript(fresh_schema_script(version))
            connection.execute("INSERT INTO schema_version (version) VALUES (?)", (version,))
        else:
            for step_version in range(row[0] + 1, version + 1):
                for step in MIGRATION_STEPS[step_version]:
                    if isinstance(step, str):
                        connection.execute(step)
                        continue
                    table, column = step
                    try:
                        connection.execute(f"ALTER TABLE {table} ADD COLUMN {column}")
                    except sqlite3.OperationalError as error:
                        if "duplicate column" not in str(error):
                            raise
                connection.execute("UPDATE schema_version SET version = ?", (step_version,))
        connection.executescript(DOCUMENTED_FTS_DDL)
    finally:
        connection.close()


# ---------------------------------------------------------------------------
# Sample data: a lineage root -> child -> grandchild plus an unrelated session.
# ---------------------------------------------------------------------------
SESSIONS: tuple[dict[str, Any], ...] = (
    {
        "id": "sess_root",
        "source": "cli",
        "user_id": "user_1",
        "model": "anthropic/claude-sonnet-4.6",
        "model_config": '{"temperature": 0.2}',
        "system_prompt": "You are Hermes.",
        "parent_session_id": None,
        "started_at": 1_700_000_000.125,
        "ended_at": 1_700_000_900.5,
        "end_reason": "compression",
        "message_count": 3,
        "tool_call_count": 1,
        "input_tokens": 1200,
        "output_tokens": 340,
    },
    {
        "id": "sess_child",
        "source": "telegram",
        "user_id": "user_1",
        "model": "anthropic/claude-sonnet-4.6",
        "model_config": None,
        "system_prompt": "You are Hermes, continued.",
        "parent_session_id": "sess_root",
        "started_at": 1_700_000_901.0,
        "ended_at": 1_700_001_800.0,
        "end_reason": "compression",
        "message_count": 2,
        "tool_call_count": 0,
        "input_tokens": 800,
        "output_tokens": 120,
    },
    {
        "id": "sess_grandchild",
        "source": "telegram",
        "user_id": "user_1",
        "model": "openai/gpt-5",
        "model_config": None,
        "system_prompt": None,
        "parent_session_id": "sess_child",
        "started_at": 1_700_001_801.75,
        "ended_at": None,
        "end_reason": None,
        "message_count": 2,
        "tool_call_count": 0,
        "input_tokens": 50,
        "output_tokens": 9,
    },
    {
        "id": "sess_other",
        "source": "discord",
        "user_id": None,
        "model": None,
        "model_config": None,
        "system_prompt": None,
        "parent_session_id": None,
        "started_at": 1_699_000_000.0,
        "ended_at": None,
        "end_reason": None,
        "message_count": 1,
        "tool_call_count": 0,
        "input_tokens": 0,
        "output_tokens": 0,
    },
)

TITLES = {  # v3+
    "sess_root": "Fix Docker Build",
    "sess_child": "Fix Docker Build #2",
    "sess_grandchild": "Fix Docker Build #3",
    "sess_other": None,
}

BILLING = {  # v5+
    "sess_root": {
        "cache_read_tokens": 5000,
        "cache_write_tokens": 700,
        "reasoning_tokens": 64,
        "billing_provider": "openrouter",
        "billing_base_url": "https://openrouter.example/api/v1",
        "billing_mode": "metered",
        "estimated_cost_usd": 0.0421,
        "actual_cost_usd": 0.0437,
        "cost_status": "final",
        "cost_source": "provider",
        "pricing_version": "2026-03",
    },
    "sess_child": {"estimated_cost_usd": 0.012, "cost_status": "estimated"},
}

# (session, role, content, extras by the version that introduced them)
MESSAGES: tuple[tuple[str, str, str | None, dict[int, dict[str, Any]]], ...] = (
    ("sess_root", "user", "Why does the docker deployment fail on arm64?", {}),
    (
        "sess_root",
        "assistant",
        None,
        {
            1: {
                "tool_calls": '[{"id": "call_1", "function": {"name": "terminal", '
                '"arguments": "{\\"cmd\\": \\"docker buildx ls\\"}"}}]',
                "token_count": 42,
            },
            2: {"finish_reason": "tool_calls"},
        },
    ),
    (
        "sess_root",
        "tool",
        "builder default: linux/amd64 only; qemu emulation missing",
        {1: {"tool_call_id": "call_1", "tool_name": "terminal"}},
    ),
    ("sess_child", "user", "Kubernetes ingress returns 502 after the rollout", {}),
    (
        "sess_child",
        "assistant",
        "The readiness probe on the helm chart points at the wrong port.",
        {
            1: {"token_count": 17},
            2: {"finish_reason": "stop"},
            6: {
                "reasoning": "Check probes first; 502 means no ready endpoints.",
                "reasoning_details": '[{"type": "summary", "text": "probes"}]',
                "codex_reasoning_items": '[{"id": "rs_1", "encrypted_content": "gAAA"}]',
            },
        },
    ),
    ("sess_grandchild", "user", "Unicode check: naïve café — zeppelin ✓", {}),
    ("sess_grandchild", "assistant", "Postgres vacuum finished; zeppelin noted.", {}),
    ("sess_other", "user", "unrelated discord chatter about marmalade", {}),
)

SEARCH_WORDS = {
    # word -> session ids of the messages that contain it
    "docker": {"sess_root"},
    "qemu": {"sess_root"},
    "kubernetes": {"sess_child"},
    "helm": {"sess_child"},
    "zeppelin": {"sess_grandchild"},
    "marmalade": {"sess_other"},
}


def _insert(connection: sqlite3.Connection, table: str, row: dict[str, Any]) -> None:
    columns = ", ".join(row)
    marks = ", ".join("?" for _ in row)
    connection.execute(f"INSERT INTO {table} ({columns}) VALUES ({marks})", tuple(row.values()))


def fill_sample_data(path: Path, version: int) -> None:
    """Write the sample sessions and messages with every field ``version`` has."""
    connection = sqlite3.connect(path)
    try:
        connection.execute("PRAGMA foreign_keys=ON")
        for session in SESSIONS:
            row = dict(session)
            if version >= 3:
                row["title"] = TITLES[session["id"]]
            if version >= 5:
                row.update(BILLING.get(session["id"], {}))
            _insert(connection, "sessions", row)
        for n, (session_id, role, content, extras) in enumerate(MESSAGES):
            row = {
                "session_id": session_id,
                "role": role,
                "content": content,
                "timestamp": 1_700_000_000.0 + 10.5 * n,
            }
            for since, values in sorted(extras.items()):
                if version >= since:
                    row.update(values)
            _insert(connection, "messages", row)
        connection.commit()
    finally:
        connection.close()


def build_legacy_db(path: Path, version: int, *, created_at: int | None = None) -> Path:
    """A state.db the old code left at ``version``, holding the sample data.

    ``created_at`` (default ``version``) is the old version that made the
    file; each version in between then opened and migrated it. Data is written
    while the file is at ``created_at``, and the values of later versions'
    columns once it reaches ``version``, the way a long-lived file fills up.
    """
    start = version if created_at is None else created_at
    if not 1 <= start <= version <= 6:
        raise ValueError(f"need 1 <= created_at <= version <= 6, got {start}, {version}")
    old_code_open(path, start)
    fill_sample_data(path, start)
    for step in range(start + 1, version + 1):
        old_code_open(path, step)
    if version > start:
        _fill_later_columns(path, start, version)
    return path


def _fill_later_columns(path: Path, start: int, version: int) -> None:
    connection = sqlite3.connect(path)
    try:
        for session in SESSIONS:
            values: dict[str, Any] = {}
            if start < 3 <= version:
                values["title"] = TITLES[session["id"]]
            if start < 5 <= version:
                values.update(BILLING.get(session["id"], {}))
            if values:
                assignments = ", ".join(f"{name} = ?" for name in values)
                connection.execute(
                    f"UPDATE sessions SET {assignments} WHERE id = ?",
                    (*values.values(), session["id"]),
                )
        for n, (_session_id, _role, _content, extras) in enumerate(MESSAGES, start=1):
            values = {}
            for since, extra in sorted(extras.items()):
                if start < since <= version:
                    values.update(extra)
            if values:
                assignments = ", ".join(f"{name} = ?" for name in values)
                connection.execute(
                    f"UPDATE messages SET {assignments} WHERE id = ?", (*values.values(), n)
                )
        connection.commit()
    finally:
        connection.close()


def snapshot(path: Path) -> dict[str, dict[Any, dict[str, Any]]]:
    """Every row of ``sessions`` and ``messages``, keyed by id, as column -> value."""
    connection = sqlite3.connect(path)
    connection.row_factory = sqlite3.Row
    try:
        return {
            table: {
                row["id"]: dict(row)
                for row in connection.execute(f"SELECT * FROM {table} ORDER BY id")
            }
            for table in ("sessions", "messages")
        }
    finally:
        connection.close()
