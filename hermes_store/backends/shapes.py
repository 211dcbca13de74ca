"""The documented queries, shaped for the file at hand.

Every read returns the documented columns -- the same keys on every file --
whatever the file holds beside them: a column the file lacks (an old file
read without being migrated) reads as NULL, and on the agent's v25 files a
session's ``system_prompt`` is looked up in ``system_prompts`` when only its
hash is kept on the row. Where messages carry the agent's ``active`` flag,
a read sees what the agent's own code shows: live rows for a conversation,
live and compaction-archived rows for search (rewound rows are hidden).

Each function is cached per :class:`~hermes_store.backends.layout.Layout`, so a
statement is built once per shape of file, not per call.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from sqlalchemy import Integer, Table, TypeDecorator, column, table
from sqlalchemy.sql.expression import TableClause
from sqlalchemy.types import TypeEngine

from hermes_store.backends.layout import MESSAGE_COLUMNS, SESSION_COLUMNS, Layout
from hermes_store.schema.tables import messages_table, sessions_table

SYSTEM_PROMPTS_JOIN = "LEFT JOIN system_prompts sp ON sp.hash = {alias}.system_prompt_hash"


def _absent(table: Table, name: str) -> str:
    """How a column the file lacks reads: what migrating it would have filled in.

    ``ALTER TABLE ADD COLUMN ... DEFAULT 0`` gives existing rows the default,
    so an old file read without being migrated reads as the migrated one would.
    """
    default = table.c[name].server_default
    value = getattr(default, "arg", None)
    literal = getattr(value, "text", None) if value is not None else None
    return f"{literal or 'NULL'} AS {name}"


def _lacking(present: frozenset[str], documented: tuple[str, ...]) -> bool:
    return not present.issuperset(documented)


@lru_cache(maxsize=64)
def shadows(layout: Layout) -> str:
    """CTEs that stand in for tables lacking documented columns (an old file, read-only).

    A CTE named like a table hides it within the statement, so a documented
    query -- ``SELECT ... FROM sessions`` -- reads the file's ``main.sessions``
    with every documented column, the missing ones as migrating would fill
    them. Empty when the file has every documented column (any migrated file).
    """
    ctes = []
    for name, present, documented, model in (
        ("sessions", layout.session_columns, SESSION_COLUMNS, sessions_table),
        ("messages", layout.message_columns, MESSAGE_COLUMNS, messages_table),
    ):
        if _lacking(present, documented):
            columns = ", ".join(
                column_name if column_name in present else _absent(model, column_name)
                for column_name in documented
            )
            ctes.append(f"{name} AS (SELECT {columns} FROM main.{name})")
    return ", ".join(ctes)


def shadowed(sql: str, layout: Layout) -> str:
    """``sql`` reading through :func:`shadows` where the file needs them."""
    ctes = shadows(layout)
    if not ctes:
        return sql
    body = sql.lstrip()
    for keyword in ("WITH RECURSIVE ", "WITH "):
        if body.upper().startswith(keyword):
            return f"{keyword}{ctes}, {body[len(keyword) :]}"
    return f"WITH {ctes} {body}"


@lru_cache(maxsize=64)
def session_columns(layout: Layout, alias: str = "s") -> str:
    """The documented session columns as a select list, for ``FROM`` :func:`sessions_from`.

    Statements built with it must go through :func:`shadowed`, which supplies
    the columns an old file lacks.
    """
    parts = []
    for name in SESSION_COLUMNS:
        if name == "system_prompt" and layout.system_prompts:
            parts.append(f"COALESCE(sp.prompt, {alias}.system_prompt) AS system_prompt")
        else:
            parts.append(f"{alias}.{name}")
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
    """The documented message columns as a select list (through :func:`shadowed`)."""
    return ", ".join(f"{alias}.{name}" for name in MESSAGE_COLUMNS)


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


def storage_type(column_type: TypeEngine[Any]) -> TypeEngine[Any]:
    """The type a column is stored as: a decorated type's own storage (JSON kept as TEXT).

    The store's own statements bind the values it has already checked and
    encoded (JSON as text), so they write through clauses typed with this,
    never through the ORM's decorated types.
    """
    return column_type.impl_instance if isinstance(column_type, TypeDecorator) else column_type


@lru_cache(maxsize=64)
def writable_sessions(layout: Layout) -> TableClause:
    """``sessions`` with the documented columns this file has, typed as they are stored."""
    return table(
        "sessions",
        *(
            column(name, storage_type(sessions_table.c[name].type))
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
    columns = [column(name, storage_type(messages_table.c[name].type)) for name in names]
    if layout.tracks_active:
        columns.append(column("active", Integer()))
    return table("messages", *columns), tuple(name for name in names if name != "id")
