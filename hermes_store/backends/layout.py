"""What a state.db actually holds: its columns, its search indexes and their shapes.

A file at our head revision has the layout this package builds
(:data:`STANDARD`), and opening one costs nothing beyond the version read of
:mod:`hermes_store.schema.state`. Any other file -- one the Hermes agent's
own code moved to its schema versions 7 ... 25, or an old file opened
read-only, which may not be migrated -- is read as it is: the layout is
found by introspection (:mod:`hermes_store.backends.sqlite.layout`) and the
repositories build their statements for it.

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

from dataclasses import dataclass, field, fields

from hermes_store.schema import totals
from hermes_store.schema.state import (
    HEAD_REVISION,
    HEAD_SCHEMA_VERSION,
    Ladder,
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
    _hash: int = field(init=False, repr=False, compare=False, default=0)

    def __post_init__(self) -> None:
        # Hashed on every lookup of a layout's statements: computed once, not per lookup.
        key = tuple(getattr(self, f.name) for f in fields(self) if f.compare)
        object.__setattr__(self, "_hash", hash(key))

    def __hash__(self) -> int:
        return self._hash

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
        return self is STANDARD or self == STANDARD

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
# the layout a store's units of work use
# ---------------------------------------------------------------------------
class LayoutCell:
    """The current layout of one store's file and the schema cookie it was read at.

    Shared by all of a store's units of work. Both are replaced together, as
    one tuple (an attribute store is atomic under the GIL); every unit on
    SQLite compares the file's cookie with :attr:`cookie` and reads the
    layout again when they differ (:func:`hermes_store.backends.sqlite.layout.refresh`).
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

    def keep(self, layout: Layout, cookie: int | None) -> Layout:
        """Hold ``layout`` as the one read at schema ``cookie`` (a file backend reads it)."""
        self._current = (layout, cookie)
        return layout
