"""Messages: append, read back in order, clear; JSON fields stay text here."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import bindparam, delete, func, insert, select
from sqlalchemy.engine import Connection

from ..models import messages_table

M = messages_table

MESSAGE_FIELDS = tuple(column.name for column in M.columns if column.name != "id")
"""Every column a caller supplies; ``add`` expects all of them (None where absent)."""

_INSERT = insert(M)
_INSERT_RETURNING = insert(M).returning(M.c.id, sort_by_parameter_order=True)
_FOR_SESSION = select(M).where(M.c.session_id == bindparam("p_id")).order_by(M.c.timestamp, M.c.id)
_CONVERSATION = (
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
    .order_by(M.c.timestamp, M.c.id)
)
_DELETE_FOR_SESSION = delete(M).where(M.c.session_id == bindparam("p_id"))
_COUNT_ALL = select(func.count()).select_from(M)
_COUNT_SESSION = select(func.count()).select_from(M).where(M.c.session_id == bindparam("p_id"))


class MessageRepository:
    """The ``messages`` table: rows come and go as plain dicts of column values."""

    def __init__(self, connection: Connection) -> None:
        self._c = connection

    def add(self, row: dict[str, Any]) -> int:
        result = self._c.execute(_INSERT, row)
        (message_id,) = result.inserted_primary_key
        return int(message_id)

    def add_many(self, rows: Sequence[dict[str, Any]]) -> list[int]:
        """Insert rows in one round of executemany and return their ids in order."""
        if not rows:
            return []
        return [int(i) for i in self._c.execute(_INSERT_RETURNING, list(rows)).scalars()]

    def for_session(self, session_id: str) -> list[dict[str, Any]]:
        return [dict(r) for r in self._c.execute(_FOR_SESSION, {"p_id": session_id}).mappings()]

    def conversation_rows(self, session_id: str) -> list[dict[str, Any]]:
        rows = self._c.execute(_CONVERSATION, {"p_id": session_id}).mappings()
        return [dict(r) for r in rows]

    def delete_for_session(self, session_id: str) -> int:
        return self._c.execute(_DELETE_FOR_SESSION, {"p_id": session_id}).rowcount

    def count(self, session_id: str | None = None) -> int:
        if session_id is None:
            return int(self._c.execute(_COUNT_ALL).scalar_one())
        return int(self._c.execute(_COUNT_SESSION, {"p_id": session_id}).scalar_one())
