"""Health of the file: SQLite's own checks, FTS agreement, and counters recomputed."""

from __future__ import annotations

from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DatabaseError

# What the counters would be if recomputed from the messages themselves. A
# tool_calls JSON array counts its items, any other non-empty value counts one,
# exactly as append_message counts them.
_REAL_COUNTS = """
    SELECT s.id,
           COALESCE(s.message_count, 0) AS stored_messages,
           COALESCE(s.tool_call_count, 0) AS stored_tool_calls,
           (SELECT COUNT(*) FROM messages m WHERE m.session_id = s.id) AS real_messages,
           (SELECT COALESCE(SUM(
                CASE WHEN m.tool_calls IS NULL OR m.tool_calls = '' THEN 0
                     WHEN json_valid(m.tool_calls) AND json_type(m.tool_calls) = 'array'
                          THEN json_array_length(m.tool_calls)
                     ELSE 1 END), 0)
            FROM messages m WHERE m.session_id = s.id) AS real_tool_calls
    FROM sessions s
"""
_MISCOUNTED = text(
    f"SELECT * FROM ({_REAL_COUNTS}) AS c "
    "WHERE stored_messages != real_messages OR stored_tool_calls != real_tool_calls"
)
_REPAIR_COUNTERS = text(
    "UPDATE sessions SET message_count = :real_messages, tool_call_count = :real_tool_calls "
    "WHERE id = :id"
)


class MaintenanceRepository:
    """Checks and repairs; SQLite-specific, like the FTS5 index they check."""

    def __init__(self, connection: Connection) -> None:
        self._c = connection

    def integrity_problems(self) -> list[str]:
        rows = self._c.exec_driver_sql("PRAGMA integrity_check").scalars().all()
        return [] if rows == ["ok"] else [str(row) for row in rows]

    def foreign_key_problems(self) -> list[dict[str, Any]]:
        rows = self._c.exec_driver_sql("PRAGMA foreign_key_check").all()
        return [{"table": r[0], "rowid": r[1], "parent": r[2]} for r in rows]

    def fts_problem(self) -> str | None:
        """None when the FTS index agrees with ``messages``, else SQLite's complaint."""
        try:
            self._c.exec_driver_sql(
                "INSERT INTO messages_fts(messages_fts, rank) VALUES ('integrity-check', 1)"
            )
        except DatabaseError as error:
            return str(error.orig)
        return None

    def miscounted_sessions(self) -> list[dict[str, Any]]:
        return [dict(row) for row in self._c.execute(_MISCOUNTED).mappings()]

    def repair_counters(self, rows: list[dict[str, Any]]) -> None:
        if rows:
            self._c.execute(_REPAIR_COUNTERS, rows)

    def rebuild_fts(self) -> None:
        self._c.exec_driver_sql("INSERT INTO messages_fts(messages_fts) VALUES ('rebuild')")
