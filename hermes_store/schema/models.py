"""Declarative mapping of the documented state.db schema (version 6).

The classes mirror the DDL of the design document column for column, so that
a database built by the Alembic chain and one built by the old ``sqlite3``
code compare equal. The migrations, not ``metadata.create_all``, build real
databases; the metadata is the reference the schema tests hold them to and the
source of the Core tables the repositories query.

They are also real ORM entities, used through a unit of work's ORM session
(``uow.orm``, see :mod:`hermes_store.uow.orm`): JSON columns carry Python
values (:class:`~hermes_store.schema.types.JSONText`, ``TEXT`` in the DDL),
and the relationships below join sessions, their lineage and their messages.
A session's messages are a write-only collection: a session of 10,000
messages is never loaded by accident, only the page a caller selects.
"""

from __future__ import annotations

import time
from typing import Any

# The generic DOUBLE_PRECISION, not the PostgreSQL dialect's: same DDL there, and a
# program that only opens SQLite files never imports that dialect (CLI start-up).
from sqlalchemy import DOUBLE_PRECISION, REAL, BigInteger, ForeignKey, Index, Integer, Text, text
from sqlalchemy.orm import DeclarativeBase, Mapped, WriteOnlyMapped, mapped_column, relationship
from sqlalchemy.types import TypeEngine

from hermes_store.schema.types import JSONText

ZERO = text("0")

# PostgreSQL's REAL is 4 bytes: an epoch timestamp would lose its seconds. The
# store's floats are DOUBLE PRECISION there; SQLite's DDL stays the document's.
FLOAT: TypeEngine[float] = REAL().with_variant(DOUBLE_PRECISION(), "postgresql")
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
    # ``default``: client-side, for ORM inserts only (no DDL default; the store's
    # own INSERTs always give the time, from the caller's clock).
    started_at: Mapped[float] = mapped_column(FLOAT, nullable=False, default=time.time)
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

    # -- relationships (ORM only: the DDL above is all the database holds) --
    parent: Mapped[Session | None] = relationship(
        remote_side=[id], back_populates="children", lazy="select"
    )
    """The session this one was split off (a subagent, a branch, a compression continuation)."""
    children: Mapped[list[Session]] = relationship(
        back_populates="parent",
        order_by=lambda: (Session.started_at, Session.id),
        lazy="select",
    )
    """Sessions split off this one, oldest first; loaded when first read (one SELECT).

    Deleting a session through the ORM leaves its children as roots (their
    ``parent_session_id`` set NULL): the ORM's own rule for a one-to-many
    without delete cascade, and the store's.
    """
    messages: WriteOnlyMapped[Message] = relationship(
        back_populates="session",
        order_by=lambda: (Message.timestamp, Message.id),
        passive_deletes="all",
    )
    """The session's messages in (timestamp, id) order, never loaded as a whole.

    ``session.messages.select()`` is the statement for them (add ``.limit()``
    and ``.offset()`` for a page); ``session.messages.add(message)`` adds one.
    ``passive_deletes="all"``: deleting the session neither loads nor
    nullifies them -- the unit's ORM session deletes them with one statement
    first (see :mod:`hermes_store.uow.orm`), as ``SessionDB.delete_session``.
    """

    __table_args__ = (
        Index("idx_sessions_source", "source"),
        Index("idx_sessions_parent", "parent_session_id"),
        Index("idx_sessions_started", text("started_at DESC")),
        # Revision 0010's (issue #19): a listing page at any offset, the usage report.
        # Its fourth, on input_tokens + output_tokens, is spelled per backend there.
        Index(
            "idx_sessions_listing",
            text("started_at DESC"),
            "parent_session_id",
            "source",
            "id",
        ),
        Index(
            "idx_sessions_source_listing",
            "source",
            text("started_at DESC"),
            "parent_session_id",
            "id",
        ),
        Index(
            "idx_sessions_title_family",
            "title",
            "started_at",
            "id",
            sqlite_where=text("title IS NOT NULL"),
        ),
        Index(
            "idx_sessions_usage",
            "model",
            "input_tokens",
            "output_tokens",
            "estimated_cost_usd",
        ),
        # The partial indexes say their WHERE for SQLite only: a ``postgresql_where``
        # here would import the PostgreSQL dialect into every process at start-up (its
        # keyword arguments are checked against the dialect). The revisions write both
        # backends' DDL themselves; nothing builds tables from these models.
        Index(
            "idx_sessions_title_unique",
            "title",
            unique=True,
            sqlite_where=text("title IS NOT NULL"),
        ),
    )


class Message(Base):
    """One message of a session; JSON fields are stored as text, read as Python values."""

    __tablename__ = "messages"

    # ``INTEGER PRIMARY KEY`` is the rowid alias and can never hold NULL, so the
    # mapping says NOT NULL (batched INSERT ... RETURNING relies on it) although
    # SQLite's table_info reports notnull=0 for it.
    id: Mapped[int] = mapped_column(MESSAGE_ID, primary_key=True)
    # ``active_history``: the value before a change is loaded if need be, so a
    # flush that moves a message knows which session's counters it leaves.
    session_id: Mapped[str] = mapped_column(
        Text, ForeignKey("sessions.id"), nullable=False, active_history=True
    )
    role: Mapped[str] = mapped_column(Text, nullable=False)
    content: Mapped[str | None] = mapped_column(Text)
    tool_call_id: Mapped[str | None] = mapped_column(Text)
    tool_calls: Mapped[Any | None] = mapped_column(
        JSONText("messages.tool_calls"), active_history=True
    )
    tool_name: Mapped[str | None] = mapped_column(Text)
    timestamp: Mapped[float] = mapped_column(FLOAT, nullable=False, default=time.time)
    token_count: Mapped[int | None] = mapped_column(Integer)
    finish_reason: Mapped[str | None] = mapped_column(Text)
    reasoning: Mapped[str | None] = mapped_column(Text)
    reasoning_details: Mapped[Any | None] = mapped_column(JSONText("messages.reasoning_details"))
    codex_reasoning_items: Mapped[Any | None] = mapped_column(
        JSONText("messages.codex_reasoning_items")
    )

    session: Mapped[Session] = relationship(back_populates="messages", lazy="select")
    """The message's session (from the identity map when it is loaded, else one SELECT)."""

    __table_args__ = (
        Index("idx_messages_session", "session_id", "timestamp"),
        {"sqlite_autoincrement": True},
    )


# Through the metadata, not ``Model.__table__``: the same objects, typed as the
# ``Table`` they are (a declarative ``__table__`` may be any selectable).
sessions_table = Base.metadata.tables[Session.__tablename__]
messages_table = Base.metadata.tables[Message.__tablename__]
schema_version_table = Base.metadata.tables[SchemaVersion.__tablename__]
