"""Health of the file: SQLite's own checks, FTS agreement, and counters recomputed."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any, cast

from sqlalchemy import text
from sqlalchemy.engine import Connection

from hermes_store.backends.postgresql.word_index import WORD_INDEX, WORD_INDEX_DDL
from hermes_store.backends.sqlite.integrity import page_findings
from hermes_store.backends.sqlite.library import driver as sqlite3
from hermes_store.schema.layout import STANDARD, Layout
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

# PostgreSQL: the message counts in SQL; tool calls are counted in Python by the
# same rule (a cast of a malformed JSON text would abort the whole check there).
_PG_MESSAGE_COUNTS = text(
    """
    SELECT s.id,
           COALESCE(s.message_count, 0) AS stored_messages,
           COALESCE(s.tool_call_count, 0) AS stored_tool_calls,
           (SELECT COUNT(*) FROM messages m WHERE m.session_id = s.id) AS real_messages
    FROM sessions s ORDER BY s.id
    """
)
_PG_TOOL_CALLS = text(
    "SELECT session_id, tool_calls FROM messages WHERE tool_calls IS NOT NULL AND tool_calls <> ''"
)
_PG_ORPHANS = text(
    """
    SELECT 'messages' AS "table", m.id::text AS rowid, 'sessions' AS parent
    FROM messages m WHERE NOT EXISTS (SELECT 1 FROM sessions s WHERE s.id = m.session_id)
    UNION ALL
    SELECT 'sessions', c.id, 'sessions' FROM sessions c
    WHERE c.parent_session_id IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM sessions p WHERE p.id = c.parent_session_id)
    """
)
# The identity must stay ahead of the ids already used (a copy inserts explicit ids).
_PG_IDENTITY_SEQUENCE = text("SELECT pg_get_serial_sequence('messages', 'id')")
_PG_MAX_MESSAGE_ID = text("SELECT MAX(id) FROM messages")
# The search indexes revisions 0014 and 0007 build on PostgreSQL, with their DDL.
PG_SEARCH_INDEXES = {
    WORD_INDEX: WORD_INDEX_DDL,
    "idx_messages_content_trgm": "CREATE INDEX idx_messages_content_trgm ON messages "
    "USING GIN (content gin_trgm_ops)",
}
_PG_INDEX_STATE = text(
    """
    SELECT c.relname, i.indisvalid FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid
    WHERE c.relnamespace = current_schema()::regnamespace
      AND c.relname IN ('idx_messages_fts', 'idx_messages_content_trgm')
    """
)


def tool_call_total(raw: str) -> int:
    """A stored ``tool_calls`` text's count: a JSON array counts its items, else one."""
    try:
        decoded = json.loads(raw)
    except ValueError:
        return 1
    return len(decoded) if isinstance(decoded, list) else 1


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
            dbapi_connection.execute(index.integrity_check_sql)
        except sqlite3.DatabaseError as error:
            problems[index.name] = _fts_complaint(error)
    return problems


_REPAIR_COUNTERS = text(
    "UPDATE sessions SET message_count = :real_messages, tool_call_count = :real_tool_calls "
    "WHERE id = :id"
)


class MaintenanceRepository:
    """Checks and repairs, each in the dialect's own terms.

    SQLite: ``PRAGMA integrity_check`` and ``foreign_key_check``, FTS5's
    ``integrity-check``. PostgreSQL has no page check reachable from SQL
    without the ``amcheck`` extension (the server's checksums and the DBA's
    tools own that), so there "integrity" means what can break this store's
    data: a ``messages.id`` identity behind the ids in use (after a copy with
    explicit ids); foreign keys are recounted with anti-joins; "FTS" means the
    two search indexes exist and are valid, and repairing rebuilds them.
    """

    def __init__(self, connection: Connection, layout: Layout = STANDARD) -> None:
        self._c = connection
        self._sqlite = connection.dialect.name == "sqlite"
        self._layout = layout

    def integrity_problems(self) -> list[str]:
        """What is broken in the database itself, one finding a line; empty when sound.

        SQLite: ``PRAGMA integrity_check``'s findings. PostgreSQL: a
        ``messages.id`` identity that would hand out an id already used.
        """
        if not self._sqlite:
            sequence = self._c.execute(_PG_IDENTITY_SEQUENCE).scalar_one()
            last, called = self._c.exec_driver_sql(
                f"SELECT last_value, is_called FROM {sequence}"
            ).one()
            upcoming = last + 1 if called else last
            largest = self._c.execute(_PG_MAX_MESSAGE_ID).scalar()
            if largest is not None and upcoming <= largest:
                return [
                    f"messages.id identity would hand out {upcoming}, not above the largest "
                    f"id {largest}: the next append would collide (check --repair moves it)"
                ]
            return []
        return page_findings(self._c.exec_driver_sql("PRAGMA integrity_check").scalars())

    def foreign_key_problems(self) -> list[dict[str, Any]]:
        """Rows whose parent row is missing, each as ``table, rowid, parent``.

        A message of no session (``table`` ``"messages"``) or a session whose
        ``parent_session_id`` names none (``"sessions"``); ``parent`` is the
        table the missing row belongs in.
        """
        if not self._sqlite:
            return [dict(row) for row in self._c.execute(_PG_ORPHANS).mappings()]
        rows = self._c.exec_driver_sql("PRAGMA foreign_key_check").all()
        return [{"table": r[0], "rowid": r[1], "parent": r[2]} for r in rows]

    def fts_problems(self) -> dict[str, str]:
        """Each search index that disagrees with ``messages``, with what is wrong with it.

        SQLite: FTS5's ``integrity-check`` with ``rank = 1``, the form that (on
        3.40) compares an external-content index with its table, for every FTS
        index the file has, in whichever of the layouts it is (ours, or the
        agent's own: see :mod:`hermes_store.schema.layout`). FTS5 reports a mismatch
        as "database disk image is malformed"; here it is "stale", which is
        what it is and what a rebuild mends. An index whose tokenizer this
        process cannot load is left out (see :meth:`unchecked_fts`).
        """
        if not self._sqlite:
            state: dict[str, bool] = dict(self._c.execute(_PG_INDEX_STATE).all())
            bad = [name for name in PG_SEARCH_INDEXES if not state.get(name)]
            return {name: "missing or invalid" for name in bad}
        driver = cast(sqlite3.Connection, self._c.connection.driver_connection)
        return check_fts_indexes(driver, self._layout)

    def unchecked_fts(self) -> dict[str, str]:
        """Indexes the file has that this process cannot check, and why."""
        return {
            index.name: f"not checked: its tokenizer {index.tokenizer!r} cannot be loaded here"
            for index in self._layout.fts_indexes()
            if not index.usable
        }

    def miscounted_sessions(self) -> list[dict[str, Any]]:
        """Sessions whose counters disagree with their messages.

        Each: ``id, stored_messages, stored_tool_calls, real_messages,
        real_tool_calls`` (a ``tool_calls`` list counts its items, as an
        append counts them); :meth:`repair_counters` takes them as they are.
        """
        if self._sqlite:
            return [dict(row) for row in self._c.execute(_MISCOUNTED).mappings()]
        calls: Counter[str] = Counter()
        for session_id, raw in self._c.execute(_PG_TOOL_CALLS):
            calls[session_id] += tool_call_total(raw)
        wrong = []
        for row in self._c.execute(_PG_MESSAGE_COUNTS).mappings():
            counted = {**row, "real_tool_calls": calls[row["id"]]}
            if (counted["stored_messages"], counted["stored_tool_calls"]) != (
                counted["real_messages"],
                counted["real_tool_calls"],
            ):
                wrong.append(counted)
        return wrong

    def totals_problems(self) -> list[str]:
        """What revision 0011's kept totals get wrong, one line each; empty when right.

        Only where the file keeps them (tables and triggers as written): where
        the agent's code dropped a trigger, they are not read, and not judged.
        """
        if not self._sqlite or not self._c.exec_driver_sql(KEPT_TOTALS_INTACT).scalar():
            return []
        return totals_problems(self._driver())

    def repair_totals(self) -> None:
        """Set the kept totals from ``messages`` and ``sessions`` again."""
        if self._sqlite:
            fill_totals(self._driver())

    def _driver(self) -> sqlite3.Connection:
        return cast(sqlite3.Connection, self._c.connection.driver_connection)

    def repair_identity(self) -> None:
        """Move the ``messages.id`` identity past the largest id (PostgreSQL only)."""
        if not self._sqlite:
            advance_message_identity(self._c)

    def repair_counters(self, rows: list[dict[str, Any]]) -> None:
        """Set each session of ``rows`` (from :meth:`miscounted_sessions`) to its real counts."""
        if rows:
            self._c.execute(_REPAIR_COUNTERS, rows)

    def rebuild_fts(self, names: list[str]) -> None:
        """Rebuild the named search indexes (from :meth:`fts_problems`) from ``messages``."""
        if self._sqlite:
            for index in self._layout.fts_indexes():
                if index.name in names:
                    for statement in index.rebuild_statements():
                        self._c.exec_driver_sql(statement)
            return
        self._c.exec_driver_sql("CREATE EXTENSION IF NOT EXISTS pg_trgm")
        for name, ddl in PG_SEARCH_INDEXES.items():
            if name in names:
                self._c.exec_driver_sql(f"DROP INDEX IF EXISTS {name}")
                self._c.exec_driver_sql(ddl)


def advance_message_identity(connection: Connection) -> None:
    """PostgreSQL: the next ``messages.id`` handed out will be above every id in use."""
    connection.exec_driver_sql(
        "SELECT setval(pg_get_serial_sequence('messages', 'id'), "
        "COALESCE((SELECT MAX(id) FROM messages), 0) + 1, false)"
    )
