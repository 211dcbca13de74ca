"""Messages: append, read back in order, clear; JSON fields stay text here.

Append and read-back are the agent's hot paths, so their statements are
:class:`~hermes_store.prepared.Prepared`: compiled once, run on the driver.
"""

from __future__ import annotations

from collections.abc import Sequence
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

        One prepared INSERT per row: inside the unit's single transaction that
        is as fast as a multi-row statement (the FTS triggers run per row
        either way), and the ids need no sorting or guessing.
        """
        return [self.add(row) for row in rows]

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
