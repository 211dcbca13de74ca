"""The documented queries, shaped for the file at hand.

Every read returns the documented columns -- the same keys on every file --
whatever the file holds beside them: a column the file lacks (an old file
read without being migrated) reads as NULL, and on the agent's v25 files a
session's ``system_prompt`` is looked up in ``system_prompts`` when only its
hash is kept on the row. Where messages carry the agent's ``active`` flag,
a read sees what the agent's own code shows: live rows for a conversation,
live and compaction-archived rows for search (rewound rows are hidden).

Each function is cached per :class:`~hermes_store.layout.Layout`, so a
statement is built once per shape of file, not per call.
"""

from __future__ import annotations

from functools import lru_cache

from sqlalchemy import Integer, column, table
from sqlalchemy.sql.expression import TableClause

from ..layout import MESSAGE_COLUMNS, SESSION_COLUMNS, STANDARD, Layout
from ..models import messages_table, sessions_table

SYSTEM_PROMPTS_JOIN = "LEFT JOIN system_prompts sp ON sp.hash = {alias}.system_prompt_hash"


@lru_cache(maxsize=64)
def session_columns(layout: Layout, alias: str = "s") -> str:
    """The documented session columns as a select list, for ``FROM`` :func:`sessions_from`."""
    parts = []
    for name in SESSION_COLUMNS:
        if name == "system_prompt" and layout.system_prompts:
            parts.append(f"COALESCE(sp.prompt, {alias}.system_prompt) AS system_prompt")
        elif name in layout.session_columns:
            parts.append(f"{alias}.{name}")
        else:
            parts.append(f"NULL AS {name}")
    return ", ".join(parts)


@lru_cache(maxsize=64)
def sessions_from(layout: Layout, alias: str = "s") -> str:
    """``sessions <alias>``, joined to ``system_prompts`` where prompts live there."""
    source = f"sessions {alias}"
    if layout.system_prompts:
        source += " " + SYSTEM_PROMPTS_JOIN.format(alias=alias)
    return source


@lru_cache(maxsize=64)
def message_columns(layout: Layout, alias: str = "m") -> str:
    """The documented message columns as a select list (NULL where the file lacks one)."""
    return ", ".join(
        f"{alias}.{name}" if name in layout.message_columns else f"NULL AS {name}"
        for name in MESSAGE_COLUMNS
    )


def live_messages(layout: Layout, alias: str = "m") -> str:
    """``AND`` condition for the rows of a conversation: the agent's live ones."""
    return f" AND {alias}.active = 1" if layout.tracks_active else ""


def searchable_messages(layout: Layout, alias: str = "m") -> str:
    """``AND`` condition for searchable rows: live or compaction-archived, never rewound."""
    if not layout.tracks_active:
        return ""
    if layout.tracks_compacted:
        return f" AND ({alias}.active = 1 OR {alias}.compacted = 1)"
    return f" AND {alias}.active = 1"


@lru_cache(maxsize=64)
def writable_sessions(layout: Layout) -> TableClause:
    """``sessions`` with the documented columns this file has, typed as the models type them.

    Our own layout writes through the mapped table itself (PostgreSQL needs
    its primary key to return new ids).
    """
    if layout is STANDARD:
        return sessions_table
    return table(
        "sessions",
        *(
            column(name, sessions_table.c[name].type)
            for name in SESSION_COLUMNS
            if name in layout.session_columns
        ),
    )


@lru_cache(maxsize=64)
def writable_messages(layout: Layout) -> tuple[TableClause, tuple[str, ...]]:
    """``messages`` as an INSERT writes it here, and the documented columns it takes.

    Where the file has the agent's ``active`` column the INSERT sets it to 1,
    as the agent's code does: an older agent release added the column without
    its default, and its transcript loads hide every row that is not 1.
    """
    names = tuple(name for name in MESSAGE_COLUMNS if name in layout.message_columns)
    if layout is STANDARD:
        return messages_table, tuple(name for name in names if name != "id")
    columns = [column(name, messages_table.c[name].type) for name in names]
    if layout.tracks_active:
        columns.append(column("active", Integer()))
    return table("messages", *columns), tuple(name for name in names if name != "id")
