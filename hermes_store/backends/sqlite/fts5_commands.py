"""FTS5's own commands on one index of a file: check, optimize, merge, rebuild.

Kept apart from :class:`~hermes_store.backends.layout.FtsIndex`, which only
describes an index, because these statements are FTS5's (SQLite's) alone.
"""

from __future__ import annotations

from hermes_store.backends.layout import FtsIndex
from hermes_store.errors import SchemaError


def integrity_check_sql(index: FtsIndex) -> str:
    """FTS5's own check; ``rank = 1`` also compares an external index with its content."""
    return f"INSERT INTO {index.name}({index.name}, rank) VALUES ('integrity-check', 1)"


def optimize_sql(index: FtsIndex) -> str:
    """FTS5's ``'optimize'``: every segment merged into one (``hermes-store optimize``)."""
    return f"INSERT INTO {index.name}({index.name}) VALUES ('optimize')"


def merge_sql(index: FtsIndex, pages: int) -> str:
    """FTS5's incremental ``'merge'``: about ``pages`` pages of merging, if a level is due."""
    return f"INSERT INTO {index.name}({index.name}, rank) VALUES ('merge', {int(pages)})"


def rebuild_statements(index: FtsIndex) -> list[str]:
    """Statements that rebuild the index from ``messages``, the way its owner fills it.

    External content: FTS5's ``'rebuild'`` (reads the content table or view).
    Inline: emptied and filled again with what its insert trigger stores.
    Either way, the agent's background-rebuild markers are cleared after it,
    as its own rebuild clears them (a rebuilt index holds every row; the
    agent's backfill would otherwise insert rows a second time).
    """
    if index.external:
        statements = [f"INSERT INTO {index.name}({index.name}) VALUES ('rebuild')"]
    elif index.inline_values is not None:
        statements = [
            f"DELETE FROM {index.name}",
            f"INSERT INTO {index.name}(rowid, {index.columns[0]}) "
            f"SELECT id, {index.inline_values} FROM messages",
        ]
    else:
        raise SchemaError(
            f"{index.name} is an inline FTS5 table filled by no trigger this store "
            "recognises: it cannot be rebuilt here"
        )
    if index.gated_by is not None:
        keys = ", ".join(f"'{key}'" for key in index.gated_by)
        statements.append(f"DELETE FROM state_meta WHERE key IN ({keys})")
    return statements
