"""PostgreSQL as a :class:`~hermes_store.backends.base.Backend`: a server, no file layout.

The statements here are the ones whose SQL differs from SQLite's; the reasons
are PostgreSQL's: it sorts text by the database's collation, so a prefix is
no range (``starts_with`` and ``LIKE`` on revision 0015's
``text_pattern_ops`` index instead); it keeps statistics, so plans are not
steered; ``octet_length`` counts bytes. Modules are imported when first used,
so opening a SQLite file never imports psycopg or this dialect.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import bindparam, text
from sqlalchemy.engine import URL, Connection, Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql.elements import TextClause

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

# starts_with tests each id (one scan of the ids, fine at 50,000 sessions).
_PREFIX_CANDIDATES = text("SELECT id FROM sessions WHERE starts_with(id, :p_prefix) LIMIT 2")
# LIKE as a range of revision 0015's text_pattern_ops index, which includes the columns
# read; the two conditions are disjoint, and apart (UNION ALL) each is read from its
# index alone.
_TITLE_FAMILY = (
    "SELECT id, title, started_at FROM sessions WHERE title = :p_base "
    "UNION ALL SELECT id, title, started_at FROM sessions "
    "WHERE title LIKE :p_pattern ESCAPE '\\'"
)
_TEXT_SIZES = text(
    "SELECT session_id, COUNT(*), COALESCE(SUM(LENGTH(content)), 0), "
    "COALESCE(SUM(octet_length(content) - LENGTH(content)), 0) FROM messages "
    "WHERE session_id IN :p_ids GROUP BY session_id"
).bindparams(bindparam("p_ids", expanding=True))
_REJECTED_QUERY_SQLSTATES = frozenset({"42601", "54001"})
"""A tsquery syntax error, and one too big to evaluate (statement_too_complex)."""


class PostgresqlBackend:
    """PostgreSQL's answers to the store's questions (see the module docstring for why)."""

    name = "postgresql"
    keeps_totals = True
    names_indexes = False
    has_file_layout = False
    batches_inserts = False
    closes_idle_connections = False
    default_port: int | None = 5432
    missing_driver_hint = (
        "the PostgreSQL driver psycopg is not installed (pip install 'hermes-store[postgresql]')"
    )

    def database_name(self, url: URL) -> str:
        """The URL without its password."""
        return url.render_as_string(hide_password=True)

    def alive_check(self) -> Callable[[Connection], bool] | None:
        """A kept connection whose server went away is replaced before a unit runs on it."""
        from hermes_store.backends.postgresql.engine import kept_connection_alive

        return kept_connection_alive

    def driver_rules(self, connection: Connection) -> DriverRules | None:
        """Units begin through SQLAlchemy, with per-transaction settings."""
        return None

    def retry_aborted(
        self,
        run: Callable[[], _T],
        policy: ContentionPolicy,
        where: str,
        first: DBAPIError | None = None,
    ) -> _T:
        """A deadlock or serialization failure runs the unit again (:mod:`.engine`)."""
        from hermes_store.backends.postgresql.engine import retry_aborted

        result: _T = retry_aborted(run, policy, where, first=first)
        return result

    def translate_error(
        self,
        error: BaseException,
        original: BaseException | None,
        failures: Failures,
        *,
        connecting: bool,
    ) -> StoreError | None:
        """A server gone, a full disk, no resources (:mod:`.failures`)."""
        from hermes_store.backends.postgresql.failures import postgresql_failure

        return postgresql_failure(
            error, original, failures.where, failures.server, connecting=connecting
        )

    def is_corruption(self, original: BaseException) -> bool:
        """SQLSTATE ``XX001``/``XX002`` (:mod:`.failures`)."""
        from hermes_store.backends.postgresql.failures import is_postgresql_corruption

        return is_postgresql_corruption(original)

    def check_file(self, path: Path, *, read_only: bool) -> None:
        """No file: nothing to check."""

    def make_private(self, path: Path, *, tighten: bool) -> None:
        """No file: the server's roles decide who reads it."""

    def is_empty_file(self, path: Path) -> bool:
        """No file."""
        return False

    def file_watch(self, engine: Engine) -> FileWatch | None:
        """No file to be replaced."""
        return None

    def refresh_layout(self, cell: LayoutCell, connection: Connection, state: SchemaState) -> None:
        """Only our revisions build its tables: there is no other layout to read."""

    def current_layout(
        self, cell: LayoutCell, connection: Connection, dbapi_connection: Any, *, write: bool
    ) -> Layout:
        """Always the layout the cell holds (ours)."""
        return cell.layout

    def create_engine(
        self,
        url: URL,
        policy: ContentionPolicy,
        durability: Durability,
        *,
        read_only: bool = False,
    ) -> Engine:
        """Per-transaction settings, retry of aborted writes (:mod:`.engine`)."""
        from hermes_store.backends.postgresql.engine import create_postgresql_engine

        return create_postgresql_engine(url, policy, durability, read_only=read_only)

    def kept_message_count(self, connection: Connection) -> int | None:
        """Revision 0017's striped count, while its triggers exist and fire (:mod:`.totals`)."""
        from hermes_store.backends.postgresql.totals import kept_message_count

        return kept_message_count(connection)

    def kept_usage(self, connection: Connection) -> list[dict[str, Any]] | None:
        """Revision 0017's striped usage, while its triggers exist and fire (:mod:`.totals`)."""
        from hermes_store.backends.postgresql.totals import kept_usage

        return kept_usage(connection)

    def insert_if_absent(self, table: Any) -> Any:
        """``INSERT ... ON CONFLICT (id) DO NOTHING``: racing creators, the key decides."""
        from sqlalchemy.dialects.postgresql import insert

        return insert(table).on_conflict_do_nothing(index_elements=["id"])

    def prefix_candidates(self) -> TextClause:
        """Two ids that ``starts_with`` the prefix."""
        return _PREFIX_CANDIDATES

    def title_family_sql(self) -> str:
        """The title equal to ``base``, and ``LIKE 'base #%'`` apart."""
        return _TITLE_FAMILY

    def title_family_params(self, base: str) -> dict[str, str]:
        """The pattern, with LIKE's wildcards in ``base`` escaped."""
        escaped = base.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        return {"p_base": base, "p_pattern": f"{escaped} #%"}

    def text_sizes(self) -> TextClause:
        """Counts, characters and extra bytes (``octet_length``)."""
        return _TEXT_SIZES

    def roots_only_condition(self) -> str:
        """Plain: the planner has statistics, and text has no unary ``+``."""
        return "s.parent_session_id IS NULL"

    def page_order(self) -> str:
        """The start time alone."""
        return "s.started_at DESC"

    def merge_fts_sql(self, layout: Layout, pages: int) -> list[str]:
        """GIN indexes need no merge step from the store."""
        return []

    def rejected_query(self, error: DBAPIError) -> bool:
        """A tsquery syntax error or one too complex to evaluate."""
        return getattr(error.orig, "sqlstate", None) in _REJECTED_QUERY_SQLSTATES

    def refuse_locked_sessions(
        self, connection: Connection, layout: Layout, session_ids: Sequence[str]
    ) -> None:
        """Nothing to refuse: only the agent's files carry compression locks."""

    def refuse_broken_deletes(
        self, connection: Connection, layout: Layout, session_ids: Sequence[str]
    ) -> None:
        """Nothing to refuse: only the agent's v10 files have triggers that fail deletes."""

    def search(self, connection: Connection, layout: Layout) -> SearchFeatures:
        """The stored tsvector and pg_trgm (:mod:`.search`)."""
        return _search()

    def health(self, connection: Connection, layout: Layout) -> Health:
        """The identity, anti-joins and the indexes' validity (:mod:`.health`)."""
        from hermes_store.backends.postgresql.health import PostgresqlHealth

        return PostgresqlHealth(connection)

    def open_read_route(
        self,
        primary: Engine,
        replica_url: URL,
        make_engine: Callable[[URL], Engine],
        max_lag_s: float,
    ) -> ReadRoute:
        """A streaming replica, its lag taken against the primary (:mod:`.replicas`)."""
        from hermes_store.backends.postgresql.replicas import measure_replica
        from hermes_store.backends.read_route import ReadRoute

        replica = make_engine(replica_url)
        return ReadRoute(
            replica,
            lambda bound: measure_replica(primary, replica, bound),
            primary_key=primary.url.render_as_string(hide_password=False),
            max_lag_s=max_lag_s,
        )

    def vacuum(self, engine: Engine, patience_s: float) -> None:
        """``VACUUM (ANALYZE)`` of the store's tables in autocommit (:mod:`.vacuum`)."""
        from hermes_store.backends.postgresql.vacuum import vacuum

        vacuum(engine)


@cache
def _search() -> SearchFeatures:
    from hermes_store.backends.postgresql.search import PostgresqlSearch

    return PostgresqlSearch()


POSTGRESQL = PostgresqlBackend()
"""The PostgreSQL backend, as registered in :data:`hermes_store.backends.BACKENDS`."""
