"""What a search should return, read straight from the file with plain ``sqlite3``.

The search tests compare the store's hits with FTS5's own answer to the same
question; these are the pieces they share.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import closing
from pathlib import Path
from typing import Any

from hermes_store.backends.sqlite.library import driver as sqlite3

GATEWAY_FILTERS: dict[str, Any] = {
    "source_filter": ["telegram", "discord"],
    "role_filter": ["user"],
}
"""A gateway's search: its users' own words on two of its platforms."""

_GATEWAY_ORDER = (
    "SELECT f.rowid FROM messages_fts f JOIN messages m ON m.id = f.rowid "
    "JOIN sessions s ON s.id = m.session_id WHERE messages_fts MATCH ? "
    "AND m.role = 'user' AND s.source IN ('telegram', 'discord') ORDER BY rank"
)


def hit_ids(hits: Sequence[Mapping[str, Any]]) -> list[int]:
    """The message ids of search hits, in their order."""
    return [int(hit["id"]) for hit in hits]


def first_column(path: Path, sql: str, *args: object) -> list[int]:
    """The first column of every row ``sql`` gives on the file, in order."""
    with closing(sqlite3.connect(path)) as raw:
        return [row[0] for row in raw.execute(sql, args)]


def gateway_order(path: Path, query: str) -> list[int]:
    """FTS5's bm25 order of the matches of ``query`` that :data:`GATEWAY_FILTERS` let through."""
    return first_column(path, _GATEWAY_ORDER, query)
