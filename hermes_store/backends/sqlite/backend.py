"""SQLite as a :class:`~hermes_store.backends.base.Backend`: one file, ours or the agent's.

The statements here are the ones whose SQL differs from PostgreSQL's; the
reasons are SQLite's: BINARY collation compares UTF-8 bytes, so an id or
title prefix is a range of the primary key or of the unique title index; a
file the agent never ANALYZEs has no statistics, so a plan is steered with
the unary ``+`` or ``INDEXED BY``; a BLOB's ``LENGTH`` counts bytes. Modules
are imported when first used, so opening a SQLite file never imports the
PostgreSQL dialect (the command line's start-up).
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

from sqlalchemy import bindparam, text
from sqlalchemy.engine import URL, Connection, Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql.elements import TextClause

if TYPE_CHECKING:
    from hermes_store.backends.base import Health, SearchFeatures
    from hermes_store.backends.durability import Durability
    from hermes_store.backends.policy import ContentionPolicy
    from hermes_store.schema.layout import Layout

# The ids starting with a prefix are the run of ids that sort right from it (BINARY
# collation compares the UTF-8 bytes, NULs included), so the primary key index yields the
# first two and the caller keeps those that do start with it; LIKE would fold ASCII case
# and stop at a NUL.
_PREFIX_CANDIDATES = text("SELECT id FROM sessions WHERE id >= :p_prefix ORDER BY id LIMIT 2")
# The titles starting with ``base #`` are exactly those in [``base #``, ``base $``) ('$'
# follows '#'), a range the unique title index answers in a few pages, where LIKE
# (case-folding, so no index) scanned every session.
_TITLE_FAMILY = (
    "SELECT id, title, started_at FROM sessions "
    "WHERE title = :p_base OR (title >= :p_low AND title < :p_high)"
)
# The bytes of a text beyond its characters: SQLite's LENGTH of a BLOB counts bytes.
_TEXT_SIZES = text(
    "SELECT session_id, COUNT(*), COALESCE(SUM(LENGTH(content)), 0), "
    "COALESCE(SUM(LENGTH(CAST(content AS BLOB)) - LENGTH(content)), 0) FROM messages "
    "WHERE session_id IN :p_ids GROUP BY session_id"
).bindparams(bindparam("p_ids", expanding=True))


class SqliteBackend:
    """SQLite's answers to the store's questions (see the module docstring for why)."""

    name = "sqlite"
    keeps_totals = True
    names_indexes = True
    has_file_layout = True
    batches_inserts = True
    closes_idle_connections = True

    def create_engine(
        self,
        url: URL,
        policy: ContentionPolicy,
        durability: Durability,
        *,
        read_only: bool = False,
    ) -> Engine:
        """WAL, ``BEGIN IMMEDIATE`` with jittered retry (:mod:`.engine`)."""
        from hermes_store.backends.sqlite.engine import create_sqlite_engine

        return create_sqlite_engine(url, policy, durability, read_only=read_only)

    def insert_if_absent(self, table: Any) -> Any:
        """``INSERT ... ON CONFLICT (id) DO NOTHING``, the old code's INSERT OR IGNORE."""
        from sqlalchemy.dialects.sqlite import insert

        return insert(table).on_conflict_do_nothing(index_elements=["id"])

    def prefix_candidates(self) -> TextClause:
        """The first two ids at or after the prefix, from the primary key."""
        return _PREFIX_CANDIDATES

    def title_family_sql(self) -> str:
        """The title equal to ``base`` or in the range [``base #``, ``base $``)."""
        return _TITLE_FAMILY

    def title_family_params(self, base: str) -> dict[str, str]:
        """The range's ends: case-sensitive, as the numbering is."""
        return {"p_base": base, "p_low": f"{base} #", "p_high": f"{base} $"}

    def text_sizes(self) -> TextClause:
        """Counts, characters and extra bytes (``LENGTH`` of the text as a BLOB)."""
        return _TEXT_SIZES

    def roots_only_condition(self) -> str:
        """The unary ``+`` keeps the term off ``idx_sessions_parent``.

        Without statistics SQLite would look "parent IS NULL" up there --
        nearly every session -- and sort them all; with the ``+`` it walks
        ``idx_sessions_started`` newest first and stops at the page.
        """
        return "+s.parent_session_id IS NULL"

    def page_order(self) -> str:
        """The order of the full listing index (revision 0010), ties included."""
        return "s.started_at DESC, s.parent_session_id, s.source, s.id"

    def merge_fts_sql(self, layout: Layout, pages: int) -> list[str]:
        """One bounded FTS5 merge step for each index this process can load."""
        if pages <= 0:
            return []
        return [index.merge_sql(pages) for index in layout.fts_indexes() if index.usable]

    def rejected_query(self, error: DBAPIError) -> bool:
        """A MATCH FTS5 cannot parse is a plain SQLITE_ERROR ("fts5: syntax error near ...")."""
        from hermes_store.backends.sqlite.library import driver as sqlite3

        code = getattr(error.orig, "sqlite_errorcode", None)
        return code is not None and bool(code == sqlite3.SQLITE_ERROR)

    def search(self, connection: Connection, layout: Layout) -> SearchFeatures:
        """The indexes ``layout`` has that this process can read."""
        return _search_of(layout)

    def health(self, connection: Connection, layout: Layout) -> Health:
        """``PRAGMA`` checks and FTS5's integrity-check (:mod:`.health`)."""
        from hermes_store.backends.sqlite.health import SqliteHealth

        return SqliteHealth(connection, layout)


@cache
def _search_of(layout: Layout) -> SearchFeatures:
    """One search description per layout: it holds no connection, so it is shared."""
    from hermes_store.backends.sqlite.search import SqliteSearch

    return SqliteSearch(layout)


SQLITE = SqliteBackend()
"""The SQLite backend, as registered in :data:`hermes_store.backends.BACKENDS`."""
