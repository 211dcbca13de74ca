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

from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from sqlalchemy import bindparam, text
from sqlalchemy.engine import URL, Connection, Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql.elements import TextClause

from hermes_store.backends.prepared import Prepared
from hermes_store.backends.sqlite import agent_guards
from hermes_store.schema import totals

if TYPE_CHECKING:
    from hermes_store.backends.base import DriverRules, FileWatch, Health, SearchFeatures
    from hermes_store.backends.durability import Durability
    from hermes_store.backends.layout import Layout, LayoutCell
    from hermes_store.backends.policy import ContentionPolicy
    from hermes_store.backends.read_route import ReadRoute
    from hermes_store.errors import StoreError
    from hermes_store.schema.state import SchemaState
    from hermes_store.uow.failures import Failures

_T = TypeVar("_T")

SQLITE_RULES_KEY = "hermes_sqlite_rules"
"""Where :mod:`.engine` keeps a connection's rules in its ``info`` (read per unit of work)."""

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

# Revision 0011's totals, read only where the file shows them intact (schema/totals.py).
_KEPT_MESSAGE_TRUSTED = Prepared(text(totals.KEPT_MESSAGE_TRUSTED))
_KEPT_MESSAGE_COUNT = Prepared(text(totals.KEPT_MESSAGE_COUNT))
_KEPT_USAGE_TRUSTED = Prepared(text(totals.KEPT_USAGE_TRUSTED))
_KEPT_USAGE = text(totals.KEPT_USAGE)


class SqliteBackend:
    """SQLite's answers to the store's questions (see the module docstring for why)."""

    name = "sqlite"
    keeps_totals = True
    names_indexes = True
    has_file_layout = True
    batches_inserts = True
    closes_idle_connections = True
    default_port: int | None = None
    missing_driver_hint = ""

    def database_name(self, url: URL) -> str:
        """The file's path as given; an in-memory database by its URL."""
        if url.database not in (None, "", ":memory:"):
            return str(url.database)
        return url.render_as_string(hide_password=True)

    def alive_check(self) -> Callable[[Connection], bool] | None:
        """A file needs no liveness check."""
        return None

    def driver_rules(self, connection: Connection) -> DriverRules | None:
        """The engine's :class:`~hermes_store.backends.sqlite.engine.SqliteRules`."""
        return cast("DriverRules | None", connection.info.get(SQLITE_RULES_KEY))

    def retry_aborted(
        self,
        run: Callable[[], _T],
        policy: ContentionPolicy,
        where: str,
        first: DBAPIError | None = None,
    ) -> _T:
        """SQLite never aborts a transaction to retry it: writers queue at ``BEGIN IMMEDIATE``."""
        if first is not None:
            raise first
        return run()

    def translate_error(
        self,
        error: BaseException,
        original: BaseException | None,
        failures: Failures,
        *,
        connecting: bool,
    ) -> StoreError | None:
        """A full disk, a read-only file or folder, a lock (:mod:`.failures`)."""
        from hermes_store.backends.sqlite.failures import sqlite_failure

        return sqlite_failure(error, original, failures.where, failures.path)

    def is_corruption(self, original: BaseException) -> bool:
        """``SQLITE_CORRUPT`` or ``SQLITE_NOTADB`` (:mod:`.failures`)."""
        from hermes_store.backends.sqlite.failures import is_sqlite_corruption

        return is_sqlite_corruption(original)

    def check_file(self, path: Path, *, read_only: bool) -> None:
        """A short file is refused before SQLite would write a new store over it."""
        from hermes_store.backends.sqlite.private_files import require_existing_database
        from hermes_store.backends.sqlite.short_file import refuse_short_file

        refuse_short_file(path)
        if read_only:
            require_existing_database(path)

    def make_private(self, path: Path, *, tighten: bool) -> None:
        """The private file rules of :mod:`.private_files`."""
        from hermes_store.backends.sqlite.private_files import (
            ensure_private_database,
            tighten_private_database,
        )

        if tighten:
            tighten_private_database(path)
        else:
            ensure_private_database(path, tighten=False)

    def is_empty_file(self, path: Path) -> bool:
        """0 bytes: SQLite would make a store of it."""
        from hermes_store.backends.sqlite.short_file import is_empty_file

        return is_empty_file(path)

    def file_watch(self, engine: Engine) -> FileWatch | None:
        """A file's replacement is followed or refused (:mod:`.replacement`)."""
        from hermes_store.backends.sqlite.replacement import ReplacementWatch

        return ReplacementWatch(engine)

    def refresh_layout(self, cell: LayoutCell, connection: Connection, state: SchemaState) -> None:
        """The layout read on the driver's connection (ours, or the agent's)."""
        from hermes_store.backends.sqlite.layout import refresh

        refresh(cell, cast(Any, connection.connection.driver_connection), state)

    def current_layout(
        self, cell: LayoutCell, connection: Connection, dbapi_connection: Any, *, write: bool
    ) -> Layout:
        """One ``PRAGMA schema_version`` per unit: read again when the cookie moved.

        Read inside the unit's transaction, so that the layout and the
        statements that follow see the same schema. A write unit on a file
        whose cjk index this process cannot run first does what the agent's
        own code does then (see
        :func:`~hermes_store.backends.sqlite.layout.drop_unusable_cjk_triggers`).
        """
        (cookie,) = dbapi_connection.execute("PRAGMA schema_version").fetchone()
        layout = cell.layout
        if cookie == cell.cookie and not (write and layout.cjk_degrade_needed):
            return layout  # the common case: nothing more to import or read
        from hermes_store.backends.sqlite.layout import drop_unusable_cjk_triggers, refresh
        from hermes_store.schema.state import read_schema_state

        if cookie != cell.cookie:
            layout = refresh(cell, dbapi_connection, read_schema_state(connection))
        if write and layout.cjk_degrade_needed:
            drop_unusable_cjk_triggers(dbapi_connection, layout)
            layout = refresh(cell, dbapi_connection, read_schema_state(connection))
        return layout

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

    def kept_message_count(self, connection: Connection) -> int | None:
        """Revision 0011's count, where its table and triggers are as written."""
        # Prepared: an agent's count per call is this and nothing else (the hot path).
        if not _KEPT_MESSAGE_TRUSTED.scalar(connection, {}):
            return None
        kept = _KEPT_MESSAGE_COUNT.scalar(connection, {})
        return None if kept is None else int(kept)

    def kept_usage(self, connection: Connection) -> list[dict[str, Any]] | None:
        """Revision 0011's usage rows, where its table and triggers are as written."""
        if not _KEPT_USAGE_TRUSTED.scalar(connection, {}):
            return None
        return [dict(row) for row in connection.execute(_KEPT_USAGE).mappings()]

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
        from hermes_store.backends.sqlite.fts5_commands import merge_sql

        return [merge_sql(index, pages) for index in layout.fts_indexes() if index.usable]

    def rejected_query(self, error: DBAPIError) -> bool:
        """A MATCH FTS5 cannot parse is a plain SQLITE_ERROR ("fts5: syntax error near ...")."""
        from hermes_store.backends.sqlite.library import driver as sqlite3

        code = getattr(error.orig, "sqlite_errorcode", None)
        return code is not None and bool(code == sqlite3.SQLITE_ERROR)

    def refuse_locked_sessions(
        self, connection: Connection, layout: Layout, session_ids: Sequence[str]
    ) -> None:
        """The agent's compression locks (v25 files): :mod:`.agent_guards`."""
        agent_guards.refuse_locked_sessions(connection, layout, session_ids)

    def refuse_broken_deletes(
        self, connection: Connection, layout: Layout, session_ids: Sequence[str]
    ) -> None:
        """The agent's v10 inline indexes fail every delete: :mod:`.agent_guards`."""
        agent_guards.refuse_broken_deletes(connection, layout, session_ids)

    def search(self, connection: Connection, layout: Layout) -> SearchFeatures:
        """The indexes ``layout`` has that this process can read."""
        return _search_of(layout)

    def health(self, connection: Connection, layout: Layout) -> Health:
        """``PRAGMA`` checks and FTS5's integrity-check (:mod:`.health`)."""
        from hermes_store.backends.sqlite.health import SqliteHealth

        return SqliteHealth(connection, layout)

    def open_read_route(
        self,
        primary: Engine,
        replica_url: URL,
        make_engine: Callable[[URL], Engine],
        max_lag_s: float,
    ) -> ReadRoute:
        """Refused: a SQLite file has no streaming replicas (readers share the file itself)."""
        from hermes_store.errors import InvalidInputError

        raise InvalidInputError(
            f"read_url={replica_url.render_as_string(hide_password=True)!r}: a SQLite store has "
            "no read replicas (its readers share the file, and never wait for its writer); "
            "read_url is for PostgreSQL"
        )

    def vacuum(self, engine: Engine, patience_s: float) -> None:
        """``VACUUM`` on a connection of its own, then the WAL truncated (:mod:`.vacuum`)."""
        from hermes_store.backends.sqlite.vacuum import vacuum

        database = engine.url.database
        if not database:
            return  # an in-memory database has no file to shrink
        vacuum(Path(database), patience_s)


@cache
def _search_of(layout: Layout) -> SearchFeatures:
    """One search description per layout: it holds no connection, so it is shared."""
    from hermes_store.backends.sqlite.search import SqliteSearch

    return SqliteSearch(layout)


SQLITE = SqliteBackend()
"""The SQLite backend, as registered in :data:`hermes_store.backends.BACKENDS`."""
