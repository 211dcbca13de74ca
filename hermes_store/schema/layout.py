"""What a state.db actually holds: its columns, its search indexes and their shapes.

A file at our head revision has the layout this package builds
(:data:`STANDARD`), and opening one costs nothing beyond the version read of
:mod:`hermes_store.schema.state`. Any other file -- one the Hermes agent's
own code moved to its schema versions 7 ... 25, or an old file opened
read-only, which may not be migrated -- is read as it is: the layout is
found by introspection (``sqlite_master`` and the two tables' columns, one
statement) and the repositories build their statements for it.

What the agent's versions changed, as far as this store is concerned:

* columns: messages and sessions gained columns (``reasoning_content``,
  ``active`` ...); a value the agent requires is written as its code writes
  it (``active = 1``), the rest are left to their defaults;
* system prompts (agent v25): stored once in ``system_prompts`` keyed by
  their SHA-256, referenced by ``sessions.system_prompt_hash``;
* search: ``messages_fts`` external-content over ``content`` (document, v6),
  inline over ``content || tool_name || tool_calls`` (v10 fresh, v11..v22) or
  external-content over three columns (v23+); ``messages_fts_trigram`` ours
  (external-content), inline (v10/v11) or over a view that leaves out tool
  rows (v23+); ``messages_fts_cjk``, a bigram index whose tokenizer is a
  loadable extension this process may not have.

The layout is keyed by SQLite's schema cookie (``PRAGMA schema_version``,
which moves with any DDL), so a unit of work notices a change another
program made to the file and reads the layout again (see
:class:`LayoutCell`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from hermes_store.backends.sqlite.library import driver as sqlite3
from hermes_store.errors import SchemaError
from hermes_store.schema import totals
from hermes_store.schema.state import (
    HEAD_REVISION,
    HEAD_SCHEMA_VERSION,
    Ladder,
    SchemaState,
)
from hermes_store.schema.tables import messages_table, sessions_table

SESSION_COLUMNS = tuple(column.name for column in sessions_table.columns)
"""The documented ``sessions`` columns, in the document's order: what every read returns."""
MESSAGE_COLUMNS = tuple(column.name for column in messages_table.columns)
"""The documented ``messages`` columns, in the document's order."""

REQUIRED_SESSION_COLUMNS = frozenset({"id", "source", "started_at"})
REQUIRED_MESSAGE_COLUMNS = frozenset({"id", "session_id", "role", "timestamp"})

WORD_INDEX = "messages_fts"
TRIGRAM_INDEX = "messages_fts_trigram"
CJK_INDEX = "messages_fts_cjk"
FTS_TABLES = (WORD_INDEX, TRIGRAM_INDEX, CJK_INDEX)
BIGRAM_TABLE = "messages_cjk_bigrams"
"""Our CJK pair index (revision 0009): a plain table, kept by triggers in the file."""
BIGRAM_OBJECTS = frozenset(
    {
        ("table", BIGRAM_TABLE),
        ("table", "messages_cjk_positions"),
        ("trigger", "messages_cjk_bigrams_insert"),
        ("trigger", "messages_cjk_bigrams_delete"),
        ("trigger", "messages_cjk_bigrams_update"),
    }
)
"""Everything the pair index needs: without all of it, it may be stale and is not read."""
TOTALS_OBJECTS = totals.OBJECTS
"""Revision 0011's kept totals (:mod:`hermes_store.schema.totals`): the message count and
the usage per model, each in a table of ours kept by triggers in the file."""
ROOTS_LISTING_INDEX = "idx_sessions_roots_listing"
ROOTS_SOURCE_LISTING_INDEX = "idx_sessions_roots_source_listing"
"""Revision 0011's partial indexes of root sessions, which a default listing walks."""
SEARCH_FILTER_INDEX = "idx_messages_search_filter"
KEEPING_COLUMNS = ("archived", "pinned")
"""The agent's session flags (its schema 25; our revision 0016): hidden from listings, kept."""
LIVE_ROOTS_LISTING_INDEX = "idx_sessions_live_roots_listing"
LIVE_ROOTS_SOURCE_LISTING_INDEX = "idx_sessions_live_roots_source_listing"
"""Revision 0016's partial indexes of root sessions not archived (the default listing)."""
PINNED_INDEX = "idx_sessions_pinned"
"""Revision 0016's partial index of the pinned sessions (a first listing page adds them)."""
META_TABLE = "state_meta"
"""Revision 0013's (id, role, session_id) index: a filtered search tests its matches here."""


@dataclass(frozen=True)
class FtsIndex:
    """One FTS5 table over ``messages``, as the file declares it."""

    name: str
    columns: tuple[str, ...]
    """Indexed columns in declaration order; column 0 is what snippets are cut from."""
    content: str | None
    """The external-content table or view, or None for an inline table (its own copy)."""
    tokenizer: str
    usable: bool = True
    """This process can read and write it (False: its tokenizer cannot be loaded here)."""
    deletes_fail: bool = False
    """A trigger on ``messages`` sends it the external-content ``'delete'`` command,
    which an inline table rejects: every DELETE of a message fails (agent v10)."""
    skips_tool_rows: bool = False
    """Its content view leaves out ``role = 'tool'`` rows (agent v23+ trigram and cjk)."""
    inline_values: str | None = None
    """For an inline table: what its insert trigger stores, over the ``messages`` row
    (``COALESCE(content, '') || ' ' || ...`` for the agent's v10/v11); None otherwise."""
    gated_by: tuple[str, str] | None = None
    """The ``state_meta`` keys (high water, progress) its triggers are gated on while the
    agent rebuilds it in the background (v23+); None for ungated triggers."""

    @property
    def external(self) -> bool:
        return self.content is not None

    @property
    def integrity_check_sql(self) -> str:
        """FTS5's own check; ``rank = 1`` also compares an external index with its content."""
        return f"INSERT INTO {self.name}({self.name}, rank) VALUES ('integrity-check', 1)"

    @property
    def optimize_sql(self) -> str:
        """FTS5's ``'optimize'``: every segment merged into one (``hermes-store optimize``)."""
        return f"INSERT INTO {self.name}({self.name}) VALUES ('optimize')"

    def merge_sql(self, pages: int) -> str:
        """FTS5's incremental ``'merge'``: about ``pages`` pages of merging, if a level is due."""
        return f"INSERT INTO {self.name}({self.name}, rank) VALUES ('merge', {int(pages)})"

    def rebuild_statements(self) -> list[str]:
        """Statements that rebuild the index from ``messages``, the way its owner fills it.

        External content: FTS5's ``'rebuild'`` (reads the content table or view).
        Inline: emptied and filled again with what its insert trigger stores.
        Either way, the agent's background-rebuild markers are cleared after it,
        as its own rebuild clears them (a rebuilt index holds every row; the
        agent's backfill would otherwise insert rows a second time).
        """
        if self.external:
            statements = [f"INSERT INTO {self.name}({self.name}) VALUES ('rebuild')"]
        elif self.inline_values is not None:
            statements = [
                f"DELETE FROM {self.name}",
                f"INSERT INTO {self.name}(rowid, {self.columns[0]}) "
                f"SELECT id, {self.inline_values} FROM messages",
            ]
        else:
            raise SchemaError(
                f"{self.name} is an inline FTS5 table filled by no trigger this store "
                "recognises: it cannot be rebuilt here"
            )
        if self.gated_by is not None:
            keys = ", ".join(f"'{key}'" for key in self.gated_by)
            statements.append(f"DELETE FROM state_meta WHERE key IN ({keys})")
        return statements


@dataclass(frozen=True)
class Layout:
    """The parts of a file's schema the store's statements depend on.

    Two files of the same shape have equal layouts and share their statements;
    a file at our head revision has :data:`STANDARD` itself.
    """

    ladder: Ladder
    schema_version: int | None
    revision: str | None
    session_columns: frozenset[str]
    message_columns: frozenset[str]
    word: FtsIndex | None
    trigram: FtsIndex | None
    cjk: FtsIndex | None = None
    cjk_live_triggers: tuple[str, ...] = ()
    """Triggers that write ``messages_fts_cjk``: fatal to every write when it is not usable."""
    system_prompts: bool = False
    """Prompts live in ``system_prompts`` behind ``sessions.system_prompt_hash`` (agent v25)."""
    compression_locks: bool = False
    """The agent's ``compression_locks`` table: a session being compressed takes no appends."""
    bigrams: bool = False
    """Our CJK pair index (revision 0009) is there with all its triggers: short CJK terms
    read it instead of scanning. Files of the agent's own versions never get it from us."""
    kept_totals: bool = False
    """Revision 0011's totals are there with all their triggers (by name: a reader also
    compares their SQL, in the statement that reads a total)."""
    roots_listing: bool = False
    """Revision 0011's partial indexes of root sessions are there (a listing names them)."""
    search_filter: bool = False
    """Revision 0013's index of each message's role and session is there (a filtered
    search names it)."""
    live_listing: bool = False
    """Revision 0016's partial indexes of root sessions not archived are there."""
    state_meta: bool = False
    """The agent's ``state_meta`` key/value table is there (its v7+; our revision 0016)."""

    # -- what the statements need to know --------------------------------
    @property
    def tracks_active(self) -> bool:
        """Messages carry the agent's ``active`` flag (0: rewound or compacted away)."""
        return "active" in self.message_columns

    @property
    def keeps_flags(self) -> bool:
        """Sessions carry the agent's ``archived`` and ``pinned`` columns."""
        return self.session_columns.issuperset(KEEPING_COLUMNS)

    @property
    def tracks_compacted(self) -> bool:
        return "compacted" in self.message_columns

    @property
    def standard(self) -> bool:
        """The layout this package's own revisions build (equal to :data:`STANDARD`)."""
        return self == STANDARD

    @property
    def cjk_degrade_needed(self) -> bool:
        """Live cjk triggers this process cannot run: the next write must drop them first."""
        return bool(self.cjk_live_triggers) and self.cjk is not None and not self.cjk.usable

    @property
    def message_deletes_fail(self) -> FtsIndex | None:
        """An index whose trigger makes every DELETE of a message fail, if there is one."""
        for index in (self.word, self.trigram, self.cjk):
            if index is not None and index.deletes_fail:
                return index
        return None

    def fts_indexes(self) -> tuple[FtsIndex, ...]:
        return tuple(index for index in (self.word, self.trigram, self.cjk) if index is not None)

    def describe(self) -> str:
        """One line for ``hermes-store current``: which layout the store reads the file in."""
        if self.standard:
            return "hermes_store's own (document v6 + trigram and CJK pair indexes, kept totals)"
        parts = []
        if self.ladder is Ladder.AGENT:
            parts.append(f"the Hermes agent's schema version {self.schema_version}, used as it is")
        else:
            parts.append(f"document schema version {self.schema_version}, not upgraded")
        for index in self.fts_indexes():
            shape = f"external over {index.content}" if index.external else "inline"
            state = "" if index.usable else f", unusable here (tokenizer {index.tokenizer})"
            parts.append(f"{index.name}: {shape}, {', '.join(index.columns)}{state}")
        if self.bigrams:
            parts.append(f"{BIGRAM_TABLE}: ours, kept by triggers")
        if self.kept_totals:
            parts.append("message and usage totals: ours, kept by triggers")
        return "; ".join(parts)


_OURS_WORD = FtsIndex(WORD_INDEX, ("content",), "messages", "unicode61")
_OURS_TRIGRAM = FtsIndex(TRIGRAM_INDEX, ("content",), "messages", "trigram")

STANDARD = Layout(
    ladder=Ladder.OURS,
    schema_version=HEAD_SCHEMA_VERSION,
    revision=HEAD_REVISION,
    session_columns=frozenset(SESSION_COLUMNS) | frozenset(KEEPING_COLUMNS),
    message_columns=frozenset(MESSAGE_COLUMNS),
    word=_OURS_WORD,
    trigram=_OURS_TRIGRAM,
    bigrams=True,
    kept_totals=True,
    roots_listing=True,
    search_filter=True,
    live_listing=True,
    state_meta=True,
)
"""A file at our head: the document's v6 tables, the word index, our trigram and pair indexes.

PostgreSQL databases are always in this layout (our revisions alone build them);
their search indexes are expressions, which the PostgreSQL statements repeat.
"""


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


# ---------------------------------------------------------------------------
# the layout a store's units of work use
# ---------------------------------------------------------------------------
class LayoutCell:
    """The current layout of one store's file and the schema cookie it was read at.

    Shared by all of a store's units of work. Both are replaced together, as
    one tuple (an attribute store is atomic under the GIL); every unit on
    SQLite compares the file's cookie with :attr:`cookie` and reads the
    layout again when they differ (see :meth:`refresh`).
    """

    __slots__ = ("_current",)

    def __init__(self, layout: Layout = STANDARD, cookie: int | None = None) -> None:
        self._current = (layout, cookie)

    @property
    def layout(self) -> Layout:
        return self._current[0]

    @property
    def cookie(self) -> int | None:
        return self._current[1]

    def forget(self) -> None:
        """Make the next unit read the layout again (the file at the path is another one)."""
        self._current = (self._current[0], None)

    def refresh(self, dbapi_connection: sqlite3.Connection, state: SchemaState) -> Layout:
        """Read the layout again for the schema ``state`` describes, and keep it."""
        layout = layout_for(dbapi_connection, state)
        self._current = (layout, state.cookie)
        return layout


def layout_for(dbapi_connection: Any, state: SchemaState) -> Layout:
    """:data:`STANDARD` for a file at our head (no read at all), else what :func:`detect` finds."""
    if state.at_head:
        return STANDARD
    return detect(dbapi_connection, state)
