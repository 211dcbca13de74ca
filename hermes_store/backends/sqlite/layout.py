"""Reading a SQLite file's layout: introspection of the agent's schema versions.

A file at our head revision is :data:`~hermes_store.backends.layout.STANDARD`
without a read; any other file is introspected here (``sqlite_master`` and
the two tables' columns, one statement), and a process that cannot run the
agent's cjk tokenizer degrades the file the way the agent's own code does.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from hermes_store.backends.layout import (
    BIGRAM_OBJECTS,
    CJK_INDEX,
    FTS_TABLES,
    LIVE_ROOTS_LISTING_INDEX,
    LIVE_ROOTS_SOURCE_LISTING_INDEX,
    META_TABLE,
    REQUIRED_MESSAGE_COLUMNS,
    REQUIRED_SESSION_COLUMNS,
    ROOTS_LISTING_INDEX,
    ROOTS_SOURCE_LISTING_INDEX,
    SEARCH_FILTER_INDEX,
    STANDARD,
    TOTALS_OBJECTS,
    TRIGRAM_INDEX,
    WORD_INDEX,
    FtsIndex,
    Layout,
    LayoutCell,
)
from hermes_store.backends.sqlite.library import driver as sqlite3
from hermes_store.errors import SchemaError
from hermes_store.schema.state import SchemaState

# ---------------------------------------------------------------------------
# introspection
# ---------------------------------------------------------------------------
_INTROSPECT = """
    SELECT 'object', type, name, tbl_name, sql FROM sqlite_master
    UNION ALL
    SELECT 'sessions', name, "notnull", dflt_value, NULL FROM pragma_table_info('sessions')
    UNION ALL
    SELECT 'messages', name, "notnull", dflt_value, NULL FROM pragma_table_info('messages')
"""
_FTS5_ARGS = re.compile(r"using\s+fts5\s*\((?P<args>.*)\)\s*$", re.IGNORECASE | re.DOTALL)
_DELETE_COMMAND = re.compile(r"values\s*\(\s*'delete'", re.IGNORECASE)
_SKIPS_TOOL_ROWS = re.compile(r"\brole\s*(<>|!=)\s*'tool'", re.IGNORECASE)


def _split_args(args: str) -> list[str]:
    """FTS5's argument list split at top-level commas (quotes may hold commas)."""
    parts, current, quote = [], [], ""
    for char in args:
        if quote:
            current.append(char)
            if char == quote:
                quote = ""
        elif char in "'\"`[":
            quote = "]" if char == "[" else char
            current.append(char)
        elif char == ",":
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(char)
    parts.append("".join(current).strip())
    return [part for part in parts if part]


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] in "'\"`[" and value[-1] in "'\"`]":
        return value[1:-1]
    return value


def _parse_fts5(name: str, sql: str) -> FtsIndex:
    match = _FTS5_ARGS.search(sql.strip())
    if match is None:
        raise SchemaError(f"{name} is not an FTS5 table: {sql!r}")
    columns: list[str] = []
    options: dict[str, str] = {}
    for arg in _split_args(match.group("args")):
        key, equals, value = arg.partition("=")
        if equals:
            options[key.strip().lower()] = _unquote(value)
        else:
            columns.append(_unquote(arg.split()[0]))
    content = options.get("content") or None
    tokenizer = (options.get("tokenize") or "unicode61").split()[0].strip("'\"")
    return FtsIndex(name, tuple(columns), content, tokenizer)


def _usable(dbapi_connection: sqlite3.Connection, name: str) -> bool:
    """Whether this process can open the table (its tokenizer is registered here).

    A query must tokenize something to find out: newer SQLite releases load a
    table's tokenizer only when it first tokenizes, so a bare read of an index
    whose tokenizer is missing succeeds while every match and insert fails.
    """
    try:
        dbapi_connection.execute(
            f"SELECT rowid FROM {name} WHERE {name} MATCH 'a' LIMIT 1"
        ).fetchall()
    except sqlite3.OperationalError as error:
        if "tokenizer" in str(error).lower() or "no such module" in str(error).lower():
            return False
        raise
    return True


def detect(dbapi_connection: sqlite3.Connection, state: SchemaState) -> Layout:
    """The file's layout, read in one statement (plus one probe per FTS table).

    Runs inside the caller's transaction, so it sees the same snapshot as the
    statements that follow. Raises :class:`SchemaError` when a table the
    store cannot do without is missing.
    """
    objects: dict[str, tuple[str, str, str | None]] = {}
    columns: dict[str, set[str]] = {"sessions": set(), "messages": set()}
    for kind, a, b, c, d in dbapi_connection.execute(_INTROSPECT).fetchall():
        if kind == "object":
            objects[b] = (a, c, d)
        else:
            columns[kind].add(a)
    for table, required in (
        ("sessions", REQUIRED_SESSION_COLUMNS),
        ("messages", REQUIRED_MESSAGE_COLUMNS),
    ):
        missing = sorted(required - columns[table])
        if missing:
            what = f"no {table} table" if not columns[table] else f"{table} lacks {missing}"
            raise SchemaError(
                f"this state.db has {what}: it is not a Hermes session store this package can read"
            )
    triggers = {
        name: sql or "" for name, (kind, _table, sql) in objects.items() if kind == "trigger"
    }
    views = {name: sql or "" for name, (kind, _table, sql) in objects.items() if kind == "view"}

    indexes: dict[str, FtsIndex | None] = {}
    for name in FTS_TABLES:
        entry = objects.get(name)
        if entry is None or entry[0] != "table" or not entry[2]:
            indexes[name] = None
            continue
        index = _parse_fts5(name, entry[2])
        writers = [sql for sql in triggers.values() if _writes(sql, name)]
        index = replace(
            index,
            usable=_usable(dbapi_connection, name),
            deletes_fail=not index.external and any(_DELETE_COMMAND.search(sql) for sql in writers),
            skips_tool_rows=index.content in views
            and _SKIPS_TOOL_ROWS.search(views[index.content or ""]) is not None,
            inline_values=None if index.external else _inline_values(name, writers),
            gated_by=_gate_keys(writers),
        )
        indexes[name] = index
    cjk_live = tuple(sorted(name for name, sql in triggers.items() if _writes(sql, CJK_INDEX)))
    tables = {name for name, (kind, _t, _s) in objects.items() if kind == "table"}
    kinds = {(kind, name) for name, (kind, _t, _s) in objects.items()}
    return Layout(
        ladder=state.ladder,
        schema_version=state.version,
        revision=state.revision,
        session_columns=frozenset(columns["sessions"]),
        message_columns=frozenset(columns["messages"]),
        word=indexes[WORD_INDEX],
        trigram=indexes[TRIGRAM_INDEX],
        cjk=indexes[CJK_INDEX],
        cjk_live_triggers=cjk_live,
        system_prompts="system_prompts" in tables and "system_prompt_hash" in columns["sessions"],
        compression_locks="compression_locks" in tables,
        bigrams=kinds >= BIGRAM_OBJECTS,
        kept_totals=kinds >= TOTALS_OBJECTS,
        roots_listing={("index", ROOTS_LISTING_INDEX), ("index", ROOTS_SOURCE_LISTING_INDEX)}
        <= kinds,
        search_filter=("index", SEARCH_FILTER_INDEX) in kinds,
        live_listing={
            ("index", LIVE_ROOTS_LISTING_INDEX),
            ("index", LIVE_ROOTS_SOURCE_LISTING_INDEX),
        }
        <= kinds,
        state_meta=META_TABLE in tables,
    )


_INLINE_INSERT = (
    r"insert\s+into\s+{table}\s*\(\s*rowid\s*,\s*\w+\s*\)\s*"
    r"values\s*\(\s*new\.id\s*,(?P<values>.*)\)\s*;\s*end\s*$"
)
_GATE_KEY = re.compile(r"key\s*=\s*'(fts\w*_rebuild_(?:high_water|progress))'", re.IGNORECASE)


def _inline_values(table: str, writers: list[str]) -> str | None:
    """The expression an inline table's AFTER INSERT trigger stores, over ``messages``."""
    pattern = re.compile(_INLINE_INSERT.format(table=table), re.IGNORECASE | re.DOTALL)
    for sql in writers:
        if re.search(r"after\s+insert", sql, re.IGNORECASE):
            found = pattern.search(sql.strip())
            if found:
                return re.sub(r"\bnew\.", "", found.group("values").strip())
    return None


def _gate_keys(writers: list[str]) -> tuple[str, str] | None:
    """The ``state_meta`` keys an index's triggers are gated on, if they are."""
    keys = sorted({key for sql in writers for key in _GATE_KEY.findall(sql)})
    high = [key for key in keys if key.endswith("high_water")]
    progress = [key for key in keys if key.endswith("progress")]
    return (high[0], progress[0]) if high and progress else None


def _writes(trigger_sql: str, table: str) -> bool:
    """Whether a trigger's body writes ``table`` (an FTS table of messages)."""
    return re.search(rf"\binto\s+{table}\s*\(", trigger_sql, re.IGNORECASE) is not None


# ---------------------------------------------------------------------------
# the agent's documented degradation for an index this process cannot run
# ---------------------------------------------------------------------------
CJK_STALE_KEY = "fts_cjk_stale"


def drop_unusable_cjk_triggers(dbapi_connection: sqlite3.Connection, layout: Layout) -> None:
    """Do what the agent's own code does when it cannot load the cjk tokenizer.

    A trigger writing ``messages_fts_cjk`` fails every INSERT and DELETE of a
    message in a process without the ``cjk_unicode61`` extension. The
    agent's code, in that situation, records ``fts_cjk_stale = '1'`` in
    ``state_meta`` first (so a capable process later rebuilds the index
    instead of serving it with a gap) and then drops the cjk triggers. This
    runs inside the caller's write transaction: if the write fails, the
    triggers come back with its rollback.
    """
    dbapi_connection.execute(
        "INSERT INTO state_meta (key, value) VALUES (?, '1') "
        "ON CONFLICT(key) DO UPDATE SET value = '1'",
        (CJK_STALE_KEY,),
    )
    for name in layout.cjk_live_triggers:
        dbapi_connection.execute(f'DROP TRIGGER IF EXISTS "{name}"')


def layout_for(dbapi_connection: Any, state: SchemaState) -> Layout:
    """:data:`STANDARD` for a file at our head (no read at all), else what :func:`detect` finds."""
    if state.at_head:
        return STANDARD
    return detect(dbapi_connection, state)


def refresh(cell: LayoutCell, dbapi_connection: sqlite3.Connection, state: SchemaState) -> Layout:
    """Read the layout again for the schema ``state`` describes, and keep it in ``cell``."""
    return cell.keep(layout_for(dbapi_connection, state), state.cookie)
