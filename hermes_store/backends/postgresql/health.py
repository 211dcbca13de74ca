"""PostgreSQL's checks and repairs (``hermes-store check``): its backend's Health.

PostgreSQL has no page check reachable from SQL without the ``amcheck``
extension (the server's checksums and the DBA's tools own that), so here
"integrity" means what can break this store's data: a ``messages.id``
identity behind the ids in use (after a copy with explicit ids); foreign keys
are recounted with anti-joins; "FTS" means the two search indexes exist and
are valid and every message has its word vector, kept by its trigger, and
repairing puts the trigger back, refills the vectors and rebuilds the indexes.
Revision 0017's kept totals are compared with the tables (:mod:`.totals`).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection

from hermes_store.backends.postgresql import totals
from hermes_store.backends.postgresql.vector_fill import rewrite_all
from hermes_store.backends.postgresql.word_index import (
    DROP_VECTOR_TRIGGER,
    VECTOR_COLUMN,
    VECTOR_FUNCTION,
    VECTOR_FUNCTION_DDL,
    VECTOR_TRIGGER,
    VECTOR_TRIGGER_DDL,
    WORD_INDEX,
    WORD_INDEX_DDL,
    vector_function_body,
)
from hermes_store.domain.messages import stored_tool_call_total

# PostgreSQL: the message counts in SQL; tool calls are counted in Python by the
# same rule (a cast of a malformed JSON text would abort the whole check there).
_MESSAGE_COUNTS = text(
    """
    SELECT s.id,
           COALESCE(s.message_count, 0) AS stored_messages,
           COALESCE(s.tool_call_count, 0) AS stored_tool_calls,
           (SELECT COUNT(*) FROM messages m WHERE m.session_id = s.id) AS real_messages
    FROM sessions s ORDER BY s.id
    """
)
_TOOL_CALLS = text(
    "SELECT session_id, tool_calls FROM messages WHERE tool_calls IS NOT NULL AND tool_calls <> ''"
)
_ORPHANS = text(
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
_IDENTITY_SEQUENCE = text("SELECT pg_get_serial_sequence('messages', 'id')")
_MAX_MESSAGE_ID = text("SELECT MAX(id) FROM messages")
# The search indexes revisions 0014 and 0007 build on PostgreSQL, with their DDL.
SEARCH_INDEXES = {
    WORD_INDEX: WORD_INDEX_DDL,
    "idx_messages_content_trgm": "CREATE INDEX idx_messages_content_trgm ON messages "
    "USING GIN (content gin_trgm_ops)",
}
_INDEX_STATE = text(
    """
    SELECT c.relname, i.indisvalid FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid
    WHERE c.relnamespace = current_schema()::regnamespace
      AND c.relname IN ('idx_messages_fts', 'idx_messages_content_trgm')
    """
)

# The word vectors are kept by a trigger (revision 0014): one dropped or disabled
# leaves new rows without a vector, which no word search finds.
# Its function must make the head's vector (revision 0021): one put back by an older
# version, or edited by hand, gives new rows vectors that the queries' words miss.
_VECTOR_STATE = text(
    f"""
    SELECT (SELECT tgenabled <> 'D' FROM pg_trigger
            WHERE tgrelid = 'messages'::regclass AND tgname = '{VECTOR_TRIGGER}'),
           EXISTS (SELECT 1 FROM messages WHERE {VECTOR_COLUMN} IS NULL),
           COALESCE((SELECT prosrc = :body FROM pg_proc
                     WHERE proname = '{VECTOR_FUNCTION}'
                       AND pronamespace = current_schema()::regnamespace), FALSE)
    """
).bindparams(body=vector_function_body())


def advance_message_identity(connection: Connection) -> None:
    """PostgreSQL: the next ``messages.id`` handed out will be above every id in use."""
    connection.exec_driver_sql(
        "SELECT setval(pg_get_serial_sequence('messages', 'id'), "
        "COALESCE((SELECT MAX(id) FROM messages), 0) + 1, false)"
    )


class PostgresqlHealth:
    """The checks and repairs of one PostgreSQL connection's database."""

    def __init__(self, connection: Connection) -> None:
        self._c = connection

    def integrity_problems(self) -> list[str]:
        """A ``messages.id`` identity that would hand out an id already used."""
        sequence = self._c.execute(_IDENTITY_SEQUENCE).scalar_one()
        last, called = self._c.exec_driver_sql(
            f"SELECT last_value, is_called FROM {sequence}"
        ).one()
        upcoming = last + 1 if called else last
        largest = self._c.execute(_MAX_MESSAGE_ID).scalar()
        if largest is not None and upcoming <= largest:
            return [
                f"messages.id identity would hand out {upcoming}, not above the largest "
                f"id {largest}: the next append would collide (check --repair moves it)"
            ]
        return []

    def foreign_key_problems(self) -> list[dict[str, Any]]:
        """Orphans found by anti-joins (messages of no session, parents that are gone)."""
        return [dict(row) for row in self._c.execute(_ORPHANS).mappings()]

    def fts_problems(self) -> dict[str, str]:
        """The two search indexes that are missing or invalid."""
        state: dict[str, bool] = dict(self._c.execute(_INDEX_STATE).all())
        problems = {name: "missing or invalid" for name in SEARCH_INDEXES if not state.get(name)}
        kept, missing, current = self._c.execute(_VECTOR_STATE).one()
        found = [
            "its vectors' trigger is missing or disabled" if not kept else "",
            "its vectors' function does not make the current vector" if not current else "",
            "messages without a vector" if missing else "",
        ]
        if any(found):
            problems[WORD_INDEX] = "; ".join(filter(None, [problems.get(WORD_INDEX), *found]))
        return problems

    def miscounted_sessions(self) -> list[dict[str, Any]]:
        """Message counts in SQL; tool calls counted in Python by the append's rule."""
        calls: Counter[str] = Counter()
        for session_id, raw in self._c.execute(_TOOL_CALLS):
            calls[session_id] += stored_tool_call_total(raw)
        wrong = []
        for row in self._c.execute(_MESSAGE_COUNTS).mappings():
            counted = {**row, "real_tool_calls": calls[row["id"]]}
            if (counted["stored_messages"], counted["stored_tool_calls"]) != (
                counted["real_messages"],
                counted["real_tool_calls"],
            ):
                wrong.append(counted)
        return wrong

    def totals_problems(self) -> list[str]:
        """The kept totals against the tables, and their triggers that do not fire."""
        return totals.totals_problems(self._c)

    def repair_totals(self) -> None:
        """Put back the totals' triggers where one is gone or disabled, and refill them."""
        totals.repair(self._c)

    def repair_identity(self) -> None:
        """Move the ``messages.id`` identity past the largest id."""
        advance_message_identity(self._c)

    def rebuild_fts(self, names: list[str]) -> None:
        """Drop and build again each named search index."""
        self._c.exec_driver_sql("CREATE EXTENSION IF NOT EXISTS pg_trgm")
        if WORD_INDEX in names:
            self._restore_vectors()
        for name, ddl in SEARCH_INDEXES.items():
            if name in names:
                self._c.exec_driver_sql(f"DROP INDEX IF EXISTS {name}")
                self._c.exec_driver_sql(ddl)

    def _restore_vectors(self) -> None:
        """Put the vectors' trigger and function back; give every message its text's vector."""
        self._c.exec_driver_sql(VECTOR_FUNCTION_DDL)
        self._c.exec_driver_sql(DROP_VECTOR_TRIGGER)
        self._c.exec_driver_sql(VECTOR_TRIGGER_DDL)
        self._c.exec_driver_sql(rewrite_all())
