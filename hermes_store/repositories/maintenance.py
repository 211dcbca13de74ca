"""Health of the store: the backend's own checks, search-index agreement, counters recomputed."""

from __future__ import annotations

from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection

from hermes_store.backends import backend_of
from hermes_store.backends.layout import STANDARD, Layout

_REPAIR_COUNTERS = text(
    "UPDATE sessions SET message_count = :real_messages, tool_call_count = :real_tool_calls "
    "WHERE id = :id"
)


class MaintenanceRepository:
    """Checks and repairs, each in its backend's own terms (its Health).

    SQLite: ``PRAGMA integrity_check`` and ``foreign_key_check``, FTS5's
    ``integrity-check`` (:mod:`hermes_store.backends.sqlite.health`).
    PostgreSQL: the ``messages.id`` identity, anti-joins, the search indexes'
    validity (:mod:`hermes_store.backends.postgresql.health`).
    """

    def __init__(self, connection: Connection, layout: Layout = STANDARD) -> None:
        self._c = connection
        self._layout = layout
        self._health = backend_of(connection).health(connection, layout)

    def integrity_problems(self) -> list[str]:
        """What is broken in the database itself, one finding a line; empty when sound."""
        return self._health.integrity_problems()

    def foreign_key_problems(self) -> list[dict[str, Any]]:
        """Rows whose parent row is missing, each as ``table, rowid, parent``.

        A message of no session (``table`` ``"messages"``) or a session whose
        ``parent_session_id`` names none (``"sessions"``); ``parent`` is the
        table the missing row belongs in.
        """
        return self._health.foreign_key_problems()

    def fts_problems(self) -> dict[str, str]:
        """Each search index that disagrees with ``messages``, with what is wrong with it.

        An index whose tokenizer this process cannot load is left out (see
        :meth:`unchecked_fts`).
        """
        return self._health.fts_problems()

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
        return self._health.miscounted_sessions()

    def totals_problems(self) -> list[str]:
        """What revision 0011's kept totals get wrong, one line each; empty when right.

        Only where the file keeps them (tables and triggers as written): where
        the agent's code dropped a trigger, they are not read, and not judged.
        """
        return self._health.totals_problems()

    def repair_totals(self) -> None:
        """Set the kept totals from ``messages`` and ``sessions`` again."""
        self._health.repair_totals()

    def repair_identity(self) -> None:
        """Move the ``messages.id`` identity past the largest id (PostgreSQL only)."""
        self._health.repair_identity()

    def repair_counters(self, rows: list[dict[str, Any]]) -> None:
        """Set each session of ``rows`` (from :meth:`miscounted_sessions`) to its real counts."""
        if rows:
            self._c.execute(_REPAIR_COUNTERS, rows)

    def rebuild_fts(self, names: list[str]) -> None:
        """Rebuild the named search indexes (from :meth:`fts_problems`) from ``messages``."""
        self._health.rebuild_fts(names)
