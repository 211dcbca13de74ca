"""Declarative mapping of the documented state.db schema (version 6).

The classes mirror the DDL of the design document column for column, so that
a database built by the Alembic chain and one built by the old ``sqlite3``
code compare equal. The migrations, not ``metadata.create_all``, build real
databases; the metadata is the reference the schema tests hold them to and the
source of the Core tables the repositories query.

The JSON columns are :class:`~hermes_store.schema.types.JSONText`: ``TEXT`` in
the DDL, Python values for whoever reads or writes through the mapped classes.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import REAL, BigInteger, ForeignKey, Index, Integer, Text, text
from sqlalchemy.dialects.postgresql import DOUBLE_PRECISION
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from hermes_store.schema.types import JSONText

ZERO = text("0")

# PostgreSQL's REAL is 4 bytes: an epoch timestamp would lose its seconds. The
# store's floats are DOUBLE PRECISION there; SQLite's DDL stays the document's.
FLOAT = REAL().with_variant(DOUBLE_PRECISION(), "postgresql")
# ``messages.id`` is SQLite's 64-bit rowid; on PostgreSQL a BIGINT identity.
MESSAGE_ID = Integer().with_variant(BigInteger(), "postgresql")


class Base(DeclarativeBase):
    """Registry for the store's tables; nothing else shares this metadata."""


class SchemaVersion(Base):
    """The one-row table the old ``sqlite3`` store reads to decide what to migrate.

    The table has no primary key in the field, so ``version`` is the identity
    only for the mapper, not in the DDL.
    """

    __tablename__ = "schema_version"

    version: Mapped[int] = mapped_column(Integer, nullable=False)
    __mapper_args__ = {"primary_key": [version]}


class Session(Base):
    """One conversation: metadata, counters, billing, title and lineage."""

    __tablename__ = "sessions"

    # ``TEXT PRIMARY KEY`` in SQLite does not imply NOT NULL; the documented
    # DDL leaves it nullable, and so does the mapping, so both compare equal.
    id: Mapped[str] = mapped_column(Text, primary_key=True, nullable=True)
    source: Mapped[str] = mapped_column(Text, nullable=False)
    user_id: Mapped[str | None] = mapped_column(Text)
    model: Mapped[str | None] = mapped_column(Text)
    model_config: Mapped[Any | None] = mapped_column(JSONText("sessions.model_config"))
    system_prompt: Mapped[str | None] = mapped_column(Text)
    parent_session_id: Mapped[str | None] = mapped_column(Text, ForeignKey("sessions.id"))
    started_at: Mapped[float] = mapped_column(FLOAT, nullable=False)
    ended_at: Mapped[float | None] = mapped_column(FLOAT)
    end_reason: Mapped[str | None] = mapped_column(Text)
    message_count: Mapped[int | None] = mapped_column(Integer, server_default=ZERO)
    tool_call_count: Mapped[int | None] = mapped_column(Integer, server_default=ZERO)
    input_tokens: Mapped[int | None] = mapped_column(Integer, server_default=ZERO)
    output_tokens: Mapped[int | None] = mapped_column(Integer, server_default=ZERO)
    cache_read_tokens: Mapped[int | None] = mapped_column(Integer, server_default=ZERO)
    cache_write_tokens: Mapped[int | None] = mapped_column(Integer, server_default=ZERO)
    reasoning_tokens: Mapped[int | None] = mapped_column(Integer, server_default=ZERO)
    billing_provider: Mapped[str | None] = mapped_column(Text)
    billing_base_url: Mapped[str | None] = mapped_column(Text)
    billing_mode: Mapped[str | None] = mapped_column(Text)
    estimated_cost_usd: Mapped[float | None] = mapped_column(FLOAT)
    actual_cost_usd: Mapped[float | None] = mapped_column(FLOAT)
    cost_status: Mapped[str | None] = mapped_column(Text)
    cost_source: Mapped[str | None] = mapped_column(Text)
    pricing_version: Mapped[str | None] = mapped_column(Text)
    title: Mapped[str | None] = mapped_column(Text)

    __table_args__ = (
        Index("idx_sessions_source", "source"),
        Index("idx_sessions_parent", "parent_session_id"),
        Index("idx_sessions_started", text("started_at DESC")),
        Index(
            "idx_sessions_title_unique",
            "title",
            unique=True,
            sqlite_where=text("title IS NOT NULL"),
            postgresql_where=text("title IS NOT NULL"),
        ),
    )


class Message(Base):
    """One message of a session; JSON fields are stored as text, read as Python values."""

    __tablename__ = "messages"

    # ``INTEGER PRIMARY KEY`` is the rowid alias and can never hold NULL, so the
    # mapping says NOT NULL (batched INSERT ... RETURNING relies on it) although
    # SQLite's table_info reports notnull=0 for it.
    id: Mapped[int] = mapped_column(MESSAGE_ID, primary_key=True)
    session_id: Mapped[str] = mapped_column(Text, ForeignKey("sessions.id"), nullable=False)
    role: Mapped[str] = mapped_column(Text, nullable=False)
    content: Mapped[str | None] = mapped_column(Text)
    tool_call_id: Mapped[str | None] = mapped_column(Text)
    tool_calls: Mapped[Any | None] = mapped_column(JSONText("messages.tool_calls"))
    tool_name: Mapped[str | None] = mapped_column(Text)
    timestamp: Mapped[float] = mapped_column(FLOAT, nullable=False)
    token_count: Mapped[int | None] = mapped_column(Integer)
    finish_reason: Mapped[str | None] = mapped_column(Text)
    reasoning: Mapped[str | None] = mapped_column(Text)
    reasoning_details: Mapped[Any | None] = mapped_column(JSONText("messages.reasoning_details"))
    codex_reasoning_items: Mapped[Any | None] = mapped_column(
        JSONText("messages.codex_reasoning_items")
    )

    __table_args__ = (
        Index("idx_messages_session", "session_id", "timestamp"),
        {"sqlite_autoincrement": True},
    )


sessions_table = Session.__table__
messages_table = Message.__table__
schema_version_table = SchemaVersion.__table__
