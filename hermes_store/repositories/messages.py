"""Messages: append, read back in order, clear; JSON fields stay text here.

Append and read-back are the agent's hot paths, so their statements are
:class:`~hermes_store.prepared.Prepared`: compiled once, run on the driver.

A batch of messages (a turn, an import) is one multi-row INSERT on SQLite,
not one INSERT per message: SQLite (3.40) opens a statement savepoint for
every statement that writes an FTS5 table, and FTS5 writes its pending index
data out as a new segment at each one. One statement per turn means one
segment per index per turn instead of one per message -- the same rows and
index, and less than half the instructions for a 6-message turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from sqlalchemy import bindparam, delete, func, insert, select
from sqlalchemy.engine import Connection

from ..models import messages_table
from ..prepared import Prepared

M = messages_table

MESSAGE_FIELDS = tuple(column.name for column in M.columns if column.name != "id")
"""Every column a caller supplies; ``add`` expects all of them (None where absent)."""

_INSERT = Prepared(insert(M), column_keys=MESSAGE_FIELDS)
# Imports and copies keep the ids they bring (search hits and exports name them).
_INSERT_WITH_ID = Prepared(insert(M), column_keys=("id", *MESSAGE_FIELDS))
_IN_SESSION_ORDER = (M.c.timestamp, M.c.id)
_FOR_SESSION = Prepared(
    select(M).where(M.c.session_id == bindparam("p_id")).order_by(*_IN_SESSION_ORDER)
)
_CONVERSATION = Prepared(
    select(
        M.c.role,
        M.c.content,
        M.c.tool_call_id,
        M.c.tool_calls,
        M.c.tool_name,
        M.c.finish_reason,
        M.c.reasoning,
        M.c.reasoning_details,
        M.c.codex_reasoning_items,
    )
    .where(M.c.session_id == bindparam("p_id"))
    .order_by(*_IN_SESSION_ORDER)
)
BATCH_ROWS = 200
"""Rows per multi-row INSERT: 13 columns x 200 rows stays far below SQLite's 32,766 parameters."""


@lru_cache(maxsize=64)
def _batch_insert(rows: int, with_ids: bool) -> tuple[Prepared, tuple[str, ...]]:
    """A ``rows``-row INSERT and its columns; its values go in row by row, column by column."""
    columns = ("id", *MESSAGE_FIELDS) if with_ids else MESSAGE_FIELDS
    values = [
        {name: bindparam(f"r{i}_{name}", type_=M.c[name].type) for name in columns}
        for i in range(rows)
    ]
    order = [bind.key for row in values for bind in row.values()]
    return Prepared(insert(M).values(values), order=order), columns


_DELETE_FOR_SESSION = delete(M).where(M.c.session_id == bindparam("p_id"))
_COUNT_ALL = select(func.count()).select_from(M)
_COUNT_SESSION = select(func.count()).select_from(M).where(M.c.session_id == bindparam("p_id"))


class MessageRepository:
    """The ``messages`` table: rows come and go as plain dicts of column values."""

    def __init__(self, connection: Connection) -> None:
        self._c = connection

    def add(self, row: dict[str, Any]) -> int:
        """Insert one row; its ``id`` if it carries one, else the next free id."""
        statement = _INSERT_WITH_ID if row.get("id") is not None else _INSERT
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
        if len(rows) < 2 or self._c.dialect.name != "sqlite":
            return [self.add(row) for row in rows]
        carried = [row.get("id") is not None for row in rows]
        if any(carried) and not all(carried):
            return [self.add(row) for row in rows]
        with_ids = carried[0]
        ids: list[int] = []
        for start in range(0, len(rows), BATCH_ROWS):
            chunk = rows[start : start + BATCH_ROWS]
            statement, columns = _batch_insert(len(chunk), with_ids)
            last = statement.last_rowid(self._c, [row[name] for row in chunk for name in columns])
            if with_ids:
                ids.extend(int(row["id"]) for row in chunk)
            else:
                ids.extend(range(last - len(chunk) + 1, last + 1))
        return ids

    def for_session(self, session_id: str) -> list[dict[str, Any]]:
        return _FOR_SESSION.dicts(self._c, {"p_id": session_id})

    def conversation_rows(self, session_id: str) -> list[dict[str, Any]]:
        return _CONVERSATION.dicts(self._c, {"p_id": session_id})

    def delete_for_session(self, session_id: str) -> int:
        return self._c.execute(_DELETE_FOR_SESSION, {"p_id": session_id}).rowcount

    def count(self, session_id: str | None = None) -> int:
        if session_id is None:
            return int(self._c.execute(_COUNT_ALL).scalar_one())
        return int(self._c.execute(_COUNT_SESSION, {"p_id": session_id}).scalar_one())
