"""The documented state.db schema (version 6) as Core tables: what the store's own SQL queries.

The tables mirror the DDL of the design document column for column, so that
a database built by the Alembic chain and one built by the old ``sqlite3``
code compare equal. The migrations, not ``metadata.create_all``, build real
databases; this metadata is the reference the schema tests hold them to and
what the repositories, the layout reader, copy and recovery build their
statements from.

They are Core, not the ORM: importing ``sqlalchemy.orm`` and mapping the
classes costs about a quarter of ``import sqlalchemy`` again, which a
one-line command (``hermes-store current``) would pay for nothing. The ORM
entities (:mod:`hermes_store.schema.models`) are mapped onto these same
``Table`` objects when a unit's ORM session is first used.
"""

from __future__ import annotations

import time

# The generic DOUBLE_PRECISION, not the PostgreSQL dialect's: same DDL there, and a
# program that only opens SQLite files never imports that dialect (CLI start-up).
from sqlalchemy import (
    DOUBLE_PRECISION,
    REAL,
    BigInteger,
    Column,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    Table,
    Text,
    text,
)
from sqlalchemy.types import TypeEngine

from hermes_store.schema.types import JSONText

ZERO = text("0")

# PostgreSQL's REAL is 4 bytes: an epoch timestamp would lose its seconds. The
# store's floats are DOUBLE PRECISION there; SQLite's DDL stays the document's.
FLOAT: TypeEngine[float] = REAL().with_variant(DOUBLE_PRECISION(), "postgresql")
# ``messages.id`` is SQLite's 64-bit rowid; on PostgreSQL a BIGINT identity.
MESSAGE_ID = Integer().with_variant(BigInteger(), "postgresql")

metadata = MetaData()
"""The store's tables; nothing else shares this metadata (the ORM's ``Base`` uses it)."""


def _counter(name: str) -> Column[int]:
    return Column(name, Integer, server_default=ZERO)


# The one-row table the old ``sqlite3`` store reads to decide what to migrate.
# It has no primary key in the field (the ORM mapping names ``version`` as the
# mapper's identity, not the DDL's).
schema_version_table = Table(
    "schema_version",
    metadata,
    Column("version", Integer, nullable=False),
)

sessions_table = Table(
    "sessions",
    metadata,
    # ``TEXT PRIMARY KEY`` in SQLite does not imply NOT NULL; the documented
    # DDL leaves it nullable, and so does the table, so both compare equal.
    Column("id", Text, primary_key=True, nullable=True),
    Column("source", Text, nullable=False),
    Column("user_id", Text),
    Column("model", Text),
    Column("model_config", JSONText("sessions.model_config")),
    Column("system_prompt", Text),
    Column("parent_session_id", Text, ForeignKey("sessions.id")),
    # ``default``: client-side, for ORM inserts (no DDL default; the store's
    # own INSERTs always give the time, from the caller's clock).
    Column("started_at", FLOAT, nullable=False, default=time.time),
    Column("ended_at", FLOAT),
    Column("end_reason", Text),
    _counter("message_count"),
    _counter("tool_call_count"),
    _counter("input_tokens"),
    _counter("output_tokens"),
    _counter("cache_read_tokens"),
    _counter("cache_write_tokens"),
    _counter("reasoning_tokens"),
    Column("billing_provider", Text),
    Column("billing_base_url", Text),
    Column("billing_mode", Text),
    Column("estimated_cost_usd", FLOAT),
    Column("actual_cost_usd", FLOAT),
    Column("cost_status", Text),
    Column("cost_source", Text),
    Column("pricing_version", Text),
    Column("title", Text),
    Index("idx_sessions_source", "source"),
    Index("idx_sessions_parent", "parent_session_id"),
    Index("idx_sessions_started", text("started_at DESC")),
    # Revision 0010's (issue #19): a listing page at any offset, the usage report.
    # Its fourth, on input_tokens + output_tokens, is spelled per backend there.
    Index("idx_sessions_listing", text("started_at DESC"), "parent_session_id", "source", "id"),
    Index(
        "idx_sessions_source_listing", "source", text("started_at DESC"), "parent_session_id", "id"
    ),
    Index(
        "idx_sessions_title_family",
        "title",
        "started_at",
        "id",
        sqlite_where=text("title IS NOT NULL"),
    ),
    Index("idx_sessions_usage", "model", "input_tokens", "output_tokens", "estimated_cost_usd"),
    # The partial indexes say their WHERE for SQLite only: a ``postgresql_where``
    # here would import the PostgreSQL dialect into every process at start-up (its
    # keyword arguments are checked against the dialect). The revisions write both
    # backends' DDL themselves; nothing builds tables from this metadata.
    Index(
        "idx_sessions_title_unique", "title", unique=True, sqlite_where=text("title IS NOT NULL")
    ),
)

messages_table = Table(
    "messages",
    metadata,
    # ``INTEGER PRIMARY KEY`` is the rowid alias and can never hold NULL, so the
    # table says NOT NULL (batched INSERT ... RETURNING relies on it) although
    # SQLite's table_info reports notnull=0 for it.
    Column("id", MESSAGE_ID, primary_key=True, nullable=False),
    Column("session_id", Text, ForeignKey("sessions.id"), nullable=False),
    Column("role", Text, nullable=False),
    Column("content", Text),
    Column("tool_call_id", Text),
    Column("tool_calls", JSONText("messages.tool_calls")),
    Column("tool_name", Text),
    Column("timestamp", FLOAT, nullable=False, default=time.time),
    Column("token_count", Integer),
    Column("finish_reason", Text),
    Column("reasoning", Text),
    Column("reasoning_details", JSONText("messages.reasoning_details")),
    Column("codex_reasoning_items", JSONText("messages.codex_reasoning_items")),
    Index("idx_messages_session", "session_id", "timestamp"),
    sqlite_autoincrement=True,
)
