"""The one interface between the store's repositories and a database backend.

Repositories (:mod:`hermes_store.repositories`) and the unit of work
(:mod:`hermes_store.uow`) never ask which database they are on: they ask the
:class:`Backend` of their connection (:func:`hermes_store.backends.backend_of`,
or ``uow.backend``) for the statement, the check or the rule, and each backend
package answers in its own terms. Where behaviour differs in kind rather than
in SQL, a capability flag says so (``keeps_totals``, ``names_indexes``,
``has_file_layout``), so the caller reads as a decision about the store, not
about a product. Adding a backend is a new package implementing this protocol
and one entry in :data:`hermes_store.backends.BACKENDS` (see the design notes,
"Adding a backend").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from sqlalchemy.engine import Connection, Engine
from sqlalchemy.engine.url import URL
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql.elements import TextClause

if TYPE_CHECKING:
    from hermes_store.backends.durability import Durability
    from hermes_store.backends.layout import Layout, LayoutCell
    from hermes_store.backends.policy import ContentionPolicy
    from hermes_store.backends.read_route import ReadRoute
    from hermes_store.errors import StoreError
    from hermes_store.schema.state import SchemaState
    from hermes_store.uow.failures import Failures

_T = TypeVar("_T")


class DriverRules(Protocol):
    """How a unit of work begins and ends its transaction on the driver itself (SQLite).

    A ``BEGIN IMMEDIATE`` and a ``COMMIT`` sent straight to the driver cost less
    than SQLAlchemy's transaction bookkeeping around them, which an append
    would otherwise pay inside the write lock; a backend without such rules
    begins through SQLAlchemy.
    """

    errors: tuple[type[Exception], ...]
    """The driver's error classes, caught where the unit ends its transaction."""

    def begin(self, dbapi_connection: Any, *, write: bool, patience_s: float | None) -> None:
        """Begin a reader's or a writer's transaction, the writer within its patience."""

    def after_write_commit(self, dbapi_connection: Any) -> None:
        """What follows a write commit (SQLite: every Nth one checkpoints the WAL)."""


class FileWatch(Protocol):
    """Notices the database file replaced under an open store, before a unit runs."""

    def follow(
        self,
        connection: Connection,
        adopting: Callable[[str], None] | None,
        on_replaced: Callable[[], None] | None,
        info: dict[Any, Any] | None = None,
    ) -> None:
        """Move ``connection`` to the file now at the path, or refuse it (StoreReplacedError).

        ``info`` is ``connection.info`` where the caller holds it already.
        """


@runtime_checkable
class Health(Protocol):
    """A backend's checks and repairs of one connection's database (``hermes-store check``)."""

    def integrity_problems(self) -> list[str]:
        """What is broken in the database itself, one finding a line; empty when sound."""

    def foreign_key_problems(self) -> list[dict[str, Any]]:
        """Rows whose parent row is missing, each as ``table, rowid, parent``."""

    def fts_problems(self) -> dict[str, str]:
        """Each search index that disagrees with ``messages``, with what is wrong with it."""

    def miscounted_sessions(self) -> list[dict[str, Any]]:
        """Sessions whose counters disagree with their messages."""

    def totals_problems(self) -> list[str]:
        """What the kept totals get wrong, one line each (empty where none are kept)."""

    def repair_totals(self) -> None:
        """Set the kept totals from ``messages`` and ``sessions`` again (where kept)."""

    def repair_identity(self) -> None:
        """Move an id generator past the largest id in use (where one can fall behind)."""

    def rebuild_fts(self, names: list[str]) -> None:
        """Rebuild the named search indexes from ``messages``."""


@runtime_checkable
class SearchFeatures(Protocol):
    """What one database's search can use (asked by the search repository)."""

    visible: str
    """An ``AND`` condition hiding rows the file's owner hides ('' when none)."""
    has_word_index: bool
    has_trigram: bool
    trigram_skips_tool_rows: bool
    has_bigrams: bool
    spells_out_prefixes: bool
    subtracts_words: bool
    """The substring route after the word route leaves the word matches out in SQL."""
    substring_like: str
    """The operator of substring tests: ``LIKE`` or ``ILIKE``."""

    def word_query(self, connection: Connection, items: list[str]) -> str:
        """Sanitized query items in this backend's word-index syntax."""

    def match_statement(
        self,
        index: str | None,
        like_sql: str | None,
        filtered: tuple[bool, bool, bool],
        anchors: int,
        ranked: bool,
        besides: str | None,
    ) -> TextClause:
        """The statement of one search (word index ``index``, or a substring test)."""

    def nth_newest_statement(self, index: str) -> TextClause:
        """The statement of a rank window's edge: the n-th newest match of ``index``."""

    def read_window(
        self,
        connection: Connection,
        statement: TextClause,
        edge: TextClause,
        params: dict[str, Any],
        nth: int | None,
    ) -> tuple[list[dict[str, Any]], int | None]:
        """One rank window's page and its oldest id (None when it is the last)."""

    def substring_indexed(self, needles: Sequence[str]) -> bool:
        """Whether a substring test of ``needles`` reads an index (else it is a scan)."""

    def hit_list_statement(self, chars: int) -> TextClause | None:
        """The context of a whole page of hits in one statement (None: one statement a hit).

        Its parameters are ``:p_ids`` and ``:p_sessions`` (the hits' ids and
        sessions, in page order); its rows ``hit, role, content``, where ``hit``
        is the hit's 1-based place in the page, in page order and within a hit
        in the session's own order, ``content`` cut to ``chars`` characters.
        A server backend saves a round trip a hit with it; an embedded one
        (SQLite) has no round trip to save and answers None.
        """


@runtime_checkable
class Backend(Protocol):
    """One database backend: its engine, its statements where they differ, its checks."""

    name: str
    """SQLAlchemy's dialect name, the key of :data:`~hermes_store.backends.BACKENDS`."""
    keeps_totals: bool
    """Reports may read kept totals (SQLite: revision 0011; PostgreSQL: 0017) where the
    layout has them, through :meth:`kept_message_count` and :meth:`kept_usage`."""
    names_indexes: bool
    """Statements may name the index to walk (SQLite's ``INDEXED BY``)."""
    has_file_layout: bool
    """The database is one file whose layout (ours, or the agent's) is read on opening."""
    batches_inserts: bool
    """A multi-row INSERT hands out consecutive ids the caller may count on."""
    closes_idle_connections: bool
    """Idle pooled connections are closed on request (each holds a file open)."""

    def __hash__(self) -> int:
        """Backends key caches of statements (one instance per backend)."""

    def create_engine(
        self,
        url: URL,
        policy: ContentionPolicy,
        durability: Durability,
        *,
        read_only: bool = False,
    ) -> Engine:
        """An engine for ``url`` with this backend's rules installed."""

    default_port: int | None
    """The port a server URL without one reaches, to name it in errors (None: a file)."""
    missing_driver_hint: str
    """What to install when the driver is missing ('' when there is nothing to say)."""

    def database_name(self, url: URL) -> str:
        """How errors name the database: its file, or its URL without the password."""

    def alive_check(self) -> Callable[[Connection], bool] | None:
        """Tells whether a kept connection still reaches its server (None: nothing to check)."""

    def driver_rules(self, connection: Connection) -> DriverRules | None:
        """The rules a unit of work begins with on the driver (None: through SQLAlchemy)."""

    def retry_aborted(
        self,
        run: Callable[[], _T],
        policy: ContentionPolicy,
        where: str,
        first: DBAPIError | None = None,
    ) -> _T:
        """``run()`` again while the database aborts it as a whole (deadlock, serialization)."""

    def translate_error(
        self,
        error: BaseException,
        original: BaseException | None,
        failures: Failures,
        *,
        connecting: bool,
    ) -> StoreError | None:
        """The store's error (a StoreError) for a driver error, or None when it is no failure."""

    def is_corruption(self, original: BaseException) -> bool:
        """Whether this backend's driver error ``original`` says the database is damaged."""

    def check_file(self, path: Path, *, read_only: bool) -> None:
        """Refuse a file that is no store before opening it (a file backend only)."""

    def make_private(self, path: Path, *, tighten: bool) -> None:
        """Make the store's file private to its user (``tighten``: its folder too)."""

    def is_empty_file(self, path: Path) -> bool:
        """Whether the file at ``path`` is empty (0 bytes: no store yet)."""

    def file_watch(self, engine: Engine) -> FileWatch | None:
        """The watch over a file replaced under the store (None: no file)."""

    def refresh_layout(self, cell: LayoutCell, connection: Connection, state: SchemaState) -> None:
        """Read the file's layout into ``cell`` (a file backend only)."""

    def current_layout(
        self, cell: LayoutCell, connection: Connection, dbapi_connection: Any, *, write: bool
    ) -> Layout:
        """The file's layout now, read again when another program changed its schema."""

    def kept_message_count(self, connection: Connection) -> int | None:
        """The kept count of all messages, or None where it is not kept or not trusted."""

    def kept_usage(self, connection: Connection) -> list[dict[str, Any]] | None:
        """The usage report's rows from kept totals, or None where they are not to be read."""

    def insert_if_absent(self, table: Any) -> Any:
        """An INSERT of a session that does nothing when its id is taken."""

    def prefix_candidates(self) -> TextClause:
        """At most two session ids that may start with ``:p_prefix`` (the caller checks)."""

    def title_family_sql(self) -> str:
        """SQL of (id, title, started_at) titled ``base`` or ``base #...`` (see its params)."""

    def title_family_params(self, base: str) -> dict[str, str]:
        """The parameters of :meth:`title_family_sql` for lineage ``base``."""

    def text_sizes(self) -> TextClause:
        """Per session of ``:p_ids``: messages, characters, and bytes beyond the characters."""

    def roots_only_condition(self) -> str:
        """The condition 'a root session' as this backend plans it well."""

    def page_order(self) -> str:
        """The order of a listing page, ties included."""

    def merge_fts_sql(self, layout: Layout, pages: int) -> list[str]:
        """Statements of one bounded merge step of the search indexes (none where not needed)."""

    def rejected_query(self, error: DBAPIError) -> bool:
        """True when the database refused a search expression, not when it failed."""

    def refuse_locked_sessions(
        self, connection: Connection, layout: Layout, session_ids: Sequence[str]
    ) -> None:
        """Refuse an append to a session another program is compressing (file layouts)."""

    def refuse_broken_deletes(
        self, connection: Connection, layout: Layout, session_ids: Sequence[str]
    ) -> None:
        """Refuse a delete of messages the file's own triggers would fail on (file layouts)."""

    def search(self, connection: Connection, layout: Layout) -> SearchFeatures:
        """What search can use on ``connection``'s database of ``layout``."""

    def health(self, connection: Connection, layout: Layout) -> Health:
        """The checks and repairs of ``connection``'s database."""

    def open_read_route(
        self,
        primary: Engine,
        replica_url: URL,
        make_engine: Callable[[URL], Engine],
        max_lag_s: float,
    ) -> ReadRoute:
        """The route of read units to the replica at ``replica_url`` (InvalidInputError where
        this backend has no replicas, before ``make_engine`` makes anything)."""

    def vacuum(self, engine: Engine, patience_s: float) -> None:
        """Give the space of deleted rows back (outside any transaction of the store's)."""
