"""The ORM entities of the documented tables: ``Session``, ``Message``, ``SchemaVersion``.

They are mapped onto the Core tables of :mod:`hermes_store.schema.tables`
(the same ``Table`` objects, so a statement built from either reads the same
columns) and used through a unit of work's ORM session (``uow.orm``, see
:mod:`hermes_store.uow.orm`). Nothing of the store's own imports this module
until that session is first used: ``sqlalchemy.orm`` and the mapping are a
quarter of ``import sqlalchemy`` again, which a reading command would pay
for nothing.

JSON columns carry Python values (:class:`~hermes_store.schema.types.JSONText`,
``TEXT`` in the DDL), and the relationships below join sessions, their
lineage and their messages. A session's messages are a write-only collection:
a session of 10,000 messages is never loaded by accident, only the page a
caller selects.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import (
    DeclarativeBase,
    Mapped,
    WriteOnlyMapped,
    column_property,
    relationship,
)

from hermes_store.schema.tables import (
    FLOAT,
    MESSAGE_ID,
    ZERO,
    messages_table,
    metadata,
    schema_version_table,
    sessions_table,
)

__all__ = [
    "FLOAT",
    "MESSAGE_ID",
    "ZERO",
    "Base",
    "Message",
    "SchemaVersion",
    "Session",
    "messages_table",
    "schema_version_table",
    "sessions_table",
]


class Base(DeclarativeBase):
    """Registry of the store's entities, over the tables' own metadata."""

    metadata = metadata


class SchemaVersion(Base):
    """The one-row table the old ``sqlite3`` store reads to decide what to migrate.

    The table has no primary key in the field, so ``version`` is the identity
    only for the mapper, not in the DDL.
    """

    __table__ = schema_version_table
    __mapper_args__ = {"primary_key": [schema_version_table.c.version]}

    version: Mapped[int]


class Session(Base):
    """One conversation: metadata, counters, billing, title and lineage."""

    __table__ = sessions_table

    id: Mapped[str]
    source: Mapped[str]
    user_id: Mapped[str | None]
    model: Mapped[str | None]
    model_config: Mapped[Any | None]
    system_prompt: Mapped[str | None]
    parent_session_id: Mapped[str | None]
    started_at: Mapped[float]
    ended_at: Mapped[float | None]
    end_reason: Mapped[str | None]
    message_count: Mapped[int | None]
    tool_call_count: Mapped[int | None]
    input_tokens: Mapped[int | None]
    output_tokens: Mapped[int | None]
    cache_read_tokens: Mapped[int | None]
    cache_write_tokens: Mapped[int | None]
    reasoning_tokens: Mapped[int | None]
    billing_provider: Mapped[str | None]
    billing_base_url: Mapped[str | None]
    billing_mode: Mapped[str | None]
    estimated_cost_usd: Mapped[float | None]
    actual_cost_usd: Mapped[float | None]
    cost_status: Mapped[str | None]
    cost_source: Mapped[str | None]
    pricing_version: Mapped[str | None]
    title: Mapped[str | None]

    # -- relationships (ORM only: the DDL is all the database holds) --
    parent: Mapped[Session | None] = relationship(
        remote_side=[sessions_table.c.id], back_populates="children", lazy="select"
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


class Message(Base):
    """One message of a session; JSON fields are stored as text, read as Python values."""

    __table__ = messages_table

    id: Mapped[int]
    # ``active_history``: the value before a change is loaded if need be, so a
    # flush that moves a message knows which session's counters it leaves.
    session_id: Mapped[str] = column_property(messages_table.c.session_id, active_history=True)
    role: Mapped[str]
    content: Mapped[str | None]
    tool_call_id: Mapped[str | None]
    tool_calls: Mapped[Any | None] = column_property(
        messages_table.c.tool_calls, active_history=True
    )
    tool_name: Mapped[str | None]
    timestamp: Mapped[float]
    token_count: Mapped[int | None]
    finish_reason: Mapped[str | None]
    reasoning: Mapped[str | None]
    reasoning_details: Mapped[Any | None]
    codex_reasoning_items: Mapped[Any | None]

    session: Mapped[Session] = relationship(back_populates="messages", lazy="select")
    """The message's session (from the identity map when it is loaded, else one SELECT)."""
