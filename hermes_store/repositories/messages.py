"""Messages: append, read back in order, clear; JSON fields stay text here.

Append and read-back are the agent's hot paths, so their statements are
:class:`~hermes_store.backends.prepared.Prepared`: compiled once, run on the driver.

A batch of messages (a turn, an import) is one multi-row INSERT on SQLite,
not one INSERT per message: SQLite (3.40) opens a statement savepoint for
every statement that writes an FTS5 table, and FTS5 writes its pending index
data out as a new segment at each one. One statement per turn means one
segment per index per turn instead of one per message -- the same rows and
index, and less than half the instructions for a 6-message turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from sqlalchemy import bindparam, insert, literal_column, text
from sqlalchemy.engine import Connection

from hermes_store.backends.prepared import Prepared
from hermes_store.repositories.agent_guards import (
    refuse_broken_deletes,
    refuse_locked_sessions,
)
from hermes_store.repositories.shapes import (
    live_messages,
    message_columns,
    shadowed,
    writable_messages,
)
from hermes_store.schema.layout import STANDARD, Layout
from hermes_store.schema.models import messages_table

M = messages_table

MESSAGE_FIELDS = tuple(column.name for column in M.columns if column.name != "id")
"""Every column a caller supplies; ``add`` expects all of them (None where absent)."""

BATCH_ROWS = 200
"""Rows per multi-row INSERT: 13 columns x 200 rows stays far below SQLite's 32,766 parameters."""

_CONVERSATION_FIELDS = (
    "role",
    "content",
    "tool_call_id",
    "tool_calls",
    "tool_name",
    "finish_reason",
    "reasoning",
    "reasoning_details",
    "codex_reasoning_items",
)


@dataclass(frozen=True)
class _Statements:
    """The statements of one file layout (see :mod:`.shapes`), built once per layout."""

    layout: Layout
    fields: tuple[str, ...]
    """The documented columns an INSERT here writes (all of them on our own files)."""
    insert: Prepared
    insert_with_id: Prepared
    for_session: Prepared
    conversation: Prepared
    delete_for_session: Any
    count_all: Any
    count_session: Any

    def batch(self, rows: int, with_ids: bool) -> tuple[Prepared, tuple[str, ...]]:
        return _batch_insert(self.layout, rows, with_ids)


def _constants(layout: Layout) -> dict[str, Any]:
    """Values every row of this layout carries without the caller: ``active = 1`` (agent v12+)."""
    return {"active": literal_column("1")} if layout.tracks_active else {}


@lru_cache(maxsize=16)
def statements_for(layout: Layout) -> _Statements:
    target, fields = writable_messages(layout)
    constants = _constants(layout)
    select_list = message_columns(layout)
    order = " ORDER BY m.timestamp, m.id"
    live = live_messages(layout)
    conversation = ", ".join(f"m.{name}" for name in _CONVERSATION_FIELDS)

    def read(sql: str) -> Any:
        return text(shadowed(sql, layout))

    return _Statements(
        layout=layout,
        fields=fields,
        insert=Prepared(insert(target).values(**constants), column_keys=fields),
        # Imports and copies keep the ids they bring (search hits and exports name them).
        insert_with_id=Prepared(insert(target).values(**constants), column_keys=("id", *fields)),
        for_session=Prepared(
            read(f"SELECT {select_list} FROM messages m WHERE m.session_id = :p_id{live}{order}")
        ),
        conversation=Prepared(
            read(f"SELECT {conversation} FROM messages m WHERE m.session_id = :p_id{live}{order}")
        ),
        delete_for_session=text("DELETE FROM messages WHERE session_id = :p_id"),
        count_all=text(f"SELECT COUNT(*) FROM messages m WHERE 1 = 1{live}"),
        count_session=text(f"SELECT COUNT(*) FROM messages m WHERE m.session_id = :p_id{live}"),
    )


@lru_cache(maxsize=64)
def _batch_insert(layout: Layout, rows: int, with_ids: bool) -> tuple[Prepared, tuple[str, ...]]:
    """A ``rows``-row INSERT and its columns; its values go in row by row, column by column."""
    target, fields = writable_messages(layout)
    columns = ("id", *fields) if with_ids else fields
    constants = _constants(layout)
    values = [
        {
            **{name: bindparam(f"r{i}_{name}", type_=target.c[name].type) for name in columns},
            **constants,
        }
        for i in range(rows)
    ]
    order = [bind.key for row in values for name, bind in row.items() if name not in constants]
    return Prepared(insert(target).values(values), order=order), columns


_STANDARD = statements_for(STANDARD)


class MessageRepository:
    """The ``messages`` table: rows come and go as plain dicts of column values.

    Rows carry the documented columns. On a file of the agent's later schema
    versions, columns it added are left to their defaults (``active`` is set
    to 1, as the agent's code sets it), and reads return the agent's live rows.
    """

    def __init__(self, connection: Connection, layout: Layout = STANDARD) -> None:
        self._c = connection
        self._layout = layout
        self._s = _STANDARD if layout is STANDARD else statements_for(layout)

    def add(self, row: dict[str, Any]) -> int:
        """Insert one row; its ``id`` if it carries one, else the next free id."""
        if self._layout.compression_locks:
            refuse_locked_sessions(self._c, self._layout, (row["session_id"],))
        statement = self._s.insert_with_id if row.get("id") is not None else self._s.insert
        return statement.inserted_id(self._c, row)

    def add_many(self, rows: Sequence[dict[str, Any]]) -> list[int]:
        """Insert rows in order and return their ids in order.

        On SQLite, rows that all carry an ``id`` or all lack one go in
        multi-row INSERTs of up to :data:`BATCH_ROWS` (see the module's
        docstring). Without ids, the rows of one statement get consecutive
        ids ending at the statement's ``lastrowid``: an AUTOINCREMENT table
        numbers the rows of one INSERT one after another, and the write lock
        lets no other writer in between. Mixed rows, and other backends, are
        inserted one by one.
        """
        if self._layout.compression_locks:
            refuse_locked_sessions(self._c, self._layout, (row["session_id"] for row in rows))
        if len(rows) < 2 or self._c.dialect.name != "sqlite":
            return [self.add(row) for row in rows]
        carried = [row.get("id") is not None for row in rows]
        if any(carried) and not all(carried):
            return [self.add(row) for row in rows]
        with_ids = carried[0]
        ids: list[int] = []
        for start in range(0, len(rows), BATCH_ROWS):
            chunk = rows[start : start + BATCH_ROWS]
            statement, columns = self._s.batch(len(chunk), with_ids)
            last = statement.last_rowid(self._c, [row[name] for row in chunk for name in columns])
            if with_ids:
                ids.extend(int(row["id"]) for row in chunk)
            else:
                ids.extend(range(last - len(chunk) + 1, last + 1))
        return ids

    def for_session(self, session_id: str) -> list[dict[str, Any]]:
        return self._s.for_session.dicts(self._c, {"p_id": session_id})

    def conversation_rows(self, session_id: str) -> list[dict[str, Any]]:
        return self._s.conversation.dicts(self._c, {"p_id": session_id})

    def delete_for_session(self, session_id: str) -> int:
        refuse_broken_deletes(self._c, self._layout, (session_id,))
        return self._c.execute(self._s.delete_for_session, {"p_id": session_id}).rowcount

    def count(self, session_id: str | None = None) -> int:
        if session_id is None:
            return int(self._c.execute(self._s.count_all).scalar_one())
        return int(self._c.execute(self._s.count_session, {"p_id": session_id}).scalar_one())
