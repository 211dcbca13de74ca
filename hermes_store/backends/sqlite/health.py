"""SQLite's checks and repairs (``hermes-store check``): its backend's Health.

``PRAGMA integrity_check`` and ``foreign_key_check``, FTS5's
``integrity-check`` for every FTS index the file has (in whichever of the
layouts it is: ours, or the agent's own), counters recomputed in SQL, and
revision 0011's kept totals where the file keeps them intact.
"""

from __future__ import annotations

from typing import Any, cast

from sqlalchemy import text
from sqlalchemy.engine import Connection

from hermes_store.backends.layout import Layout
from hermes_store.backends.sqlite.fts5_commands import integrity_check_sql, rebuild_statements
from hermes_store.backends.sqlite.integrity import page_findings
from hermes_store.backends.sqlite.library import driver as sqlite3
from hermes_store.schema.totals import KEPT_TOTALS_INTACT, fill_totals, totals_problems

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


def _fts_complaint(error: BaseException) -> str:
    """FTS5's integrity-check reports a mismatch as corruption of the virtual table."""
    original = getattr(error, "orig", error)
    code = getattr(original, "sqlite_errorcode", None)
    if code is not None and code & 0xFF == sqlite3.SQLITE_CORRUPT:
        return "stale: it does not match the messages table (check --repair rebuilds it)"
    return str(original)


def check_fts_indexes(dbapi_connection: sqlite3.Connection, layout: Layout) -> dict[str, str]:
    """Run FTS5's ``integrity-check`` (``rank = 1``) on every usable index of ``layout``.

    On the caller's driver connection, inside its transaction: the check is an
    INSERT that changes nothing, but it needs a connection that may write.
    """
    problems = {}
    for index in layout.fts_indexes():
        if not index.usable:
            continue
        try:
            dbapi_connection.execute(integrity_check_sql(index))
        except sqlite3.DatabaseError as error:
            problems[index.name] = _fts_complaint(error)
    return problems


class SqliteHealth:
    """The checks and repairs of one SQLite file, in the layout it has."""

    def __init__(self, connection: Connection, layout: Layout) -> None:
        self._c = connection
        self._layout = layout

    def _driver(self) -> sqlite3.Connection:
        return cast(sqlite3.Connection, self._c.connection.driver_connection)

    def integrity_problems(self) -> list[str]:
        """``PRAGMA integrity_check``'s findings."""
        return page_findings(self._c.exec_driver_sql("PRAGMA integrity_check").scalars())

    def foreign_key_problems(self) -> list[dict[str, Any]]:
        """``PRAGMA foreign_key_check``'s rows."""
        rows = self._c.exec_driver_sql("PRAGMA foreign_key_check").all()
        return [{"table": r[0], "rowid": r[1], "parent": r[2]} for r in rows]

    def fts_problems(self) -> dict[str, str]:
        """FTS5's ``integrity-check`` with ``rank = 1`` on every index this process can load.

        That form (on 3.40) compares an external-content index with its table.
        FTS5 reports a mismatch as "database disk image is malformed"; here it
        is "stale", which is what it is and what a rebuild mends.
        """
        return check_fts_indexes(self._driver(), self._layout)

    def miscounted_sessions(self) -> list[dict[str, Any]]:
        """Counters recomputed in SQL (``json_array_length`` of each ``tool_calls``)."""
        return [dict(row) for row in self._c.execute(_MISCOUNTED).mappings()]

    def totals_problems(self) -> list[str]:
        """Revision 0011's totals judged, where the file keeps them as written."""
        if not self._c.exec_driver_sql(KEPT_TOTALS_INTACT).scalar():
            return []
        return totals_problems(self._driver())

    def repair_totals(self) -> None:
        """Set the kept totals from ``messages`` and ``sessions`` again."""
        fill_totals(self._driver())

    def repair_identity(self) -> None:
        """AUTOINCREMENT never hands out a used id: nothing to move."""

    def rebuild_fts(self, names: list[str]) -> None:
        """FTS5's ``rebuild`` of each named index of the layout."""
        for index in self._layout.fts_indexes():
            if index.name in names:
                for statement in rebuild_statements(index):
                    self._c.exec_driver_sql(statement)
