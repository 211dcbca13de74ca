"""The store's small key/value table: the agent's ``state_meta``, shared by both programs.

The agent keeps its upkeep marks there (``last_auto_prune``, its FTS rebuild
progress); so does this store (:mod:`hermes_store.uow.upkeep`). One table,
the agent's DDL (``key TEXT PRIMARY KEY, value TEXT``), so each program
sees when the other last pruned or vacuumed and neither does it twice.
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.engine import Connection

from hermes_store.backends.layout import META_TABLE, Layout
from hermes_store.domain.arguments import text_arg
from hermes_store.errors import SchemaError

_GET = text(f"SELECT value FROM {META_TABLE} WHERE key = :p_key")
_SET = text(
    f"INSERT INTO {META_TABLE} (key, value) VALUES (:p_key, :p_value) "
    "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
)


class MetaRepository:
    """``get`` and ``set`` on ``state_meta``, inside the unit's transaction."""

    def __init__(self, connection: Connection, layout: Layout) -> None:
        self._c = connection
        self._layout = layout

    def get(self, key: str) -> str | None:
        """The value stored under ``key``, or None (no such key, or no table on this file)."""
        key = text_arg("key", key, non_empty=True)
        if not self._layout.state_meta:
            return None
        value = self._c.execute(_GET, {"p_key": key}).scalar()
        return None if value is None else str(value)

    def set(self, key: str, value: str) -> None:
        """Store ``value`` under ``key``, replacing what was there."""
        key = text_arg("key", key, non_empty=True)
        value = text_arg("value", value)
        if not self._layout.state_meta:
            raise SchemaError(
                f"this file has no {META_TABLE} table (document schema "
                f"{self._layout.schema_version}, not upgraded): upgrade it to store metadata"
            )
        self._c.execute(_SET, {"p_key": key, "p_value": value})
