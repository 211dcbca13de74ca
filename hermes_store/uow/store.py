"""The store: one engine, brought to the head schema, handing out units of work.

This is the object agent services receive by injection (it satisfies
:class:`~hermes_store.uow.unit.UnitOfWorkFactory`); there is no module-level
engine that code reaches for, so two stores on two files in one process never
share state. Stores on the *same* database and policy in one process do share
one engine (see :func:`_engine_for`): opening the store again -- a CLI command,
a worktree agent, a test -- then costs a connect and one read, not a new
engine with cold statement caches.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import TypeVar

from sqlalchemy.engine import URL, Engine
from sqlalchemy.exc import DBAPIError, NoSuchModuleError

from hermes_store.backends import backend_named, create_store_engine
from hermes_store.backends.durability import Durability
from hermes_store.backends.layout import STANDARD, Layout, LayoutCell
from hermes_store.backends.location import resolve_url, sqlite_file
from hermes_store.backends.policy import ContentionPolicy
from hermes_store.backends.read_route import DEFAULT_MAX_LAG_S, ReadRoute
from hermes_store.domain.arguments import number_arg
from hermes_store.errors import (
    InvalidInputError,
    ReadOnlyStoreError,
    SchemaError,
    StoreError,
    UnknownBackendError,
)
from hermes_store.schema.state import (
    HEAD_SCHEMA_VERSION,
    Ladder,
    read_schema_state,
    refuse_foreign_file,
)
from hermes_store.uow import deadline as deadlines
from hermes_store.uow import forking
from hermes_store.uow.connections import ThreadConnections
from hermes_store.uow.failures import Failures, missing_driver
from hermes_store.uow.group import SharedCommits
from hermes_store.uow.unit import Fallback, UnitOfWork

StepReport = Callable[[str, str, float], None]
"""``on_step(revision, what, seconds)`` (see :meth:`Store.upgrade_to_head`)."""

_T = TypeVar("_T")


@lru_cache(maxsize=16)
def _engine_for(
    url: URL, policy: ContentionPolicy, durability: Durability, read_only: bool
) -> Engine:
    """One engine per (database, policy, durability, mode) per process, reused across opens.

    ``Store.close`` empties the engine's pool, which closes its connections
    (so the file is free for others) but keeps the engine, its event rules and
    its compiled-statement cache for the next store on the same database.
    """
    return create_store_engine(url, policy, durability, read_only=read_only)


class Store:
    """Owns the engine for one database and opens units of work on it.

    ``durability`` (``"full"`` by default, or ``"normal"``) says whether a
    commit is on the disk before the call returns; see
    :mod:`hermes_store.backends.durability` for what ``"normal"`` risks and saves.

    ``shared_commits=True`` (SQLite) lets concurrent :meth:`transact` calls of
    this process's threads share one transaction and its one commit, each in
    its own savepoint (see :mod:`hermes_store.uow.group`); a writer alone
    commits at once, as without it. :meth:`write` blocks are never shared.

    ``read_only=True`` is for programs that only look (dashboards, web UIs,
    the CLI's reading commands): the file is opened read-only, never created,
    migrated, adopted or tightened, works in a folder this process cannot
    write, and never takes the write lock; :meth:`write` is refused.

    ``read_url`` (PostgreSQL) names a streaming replica of the database:
    :meth:`read` units go to it while it is up and at most
    ``max_replica_lag`` seconds behind, and not within that many seconds of
    this process's own last write there (read-your-writes); otherwise, and
    whenever it cannot be reached, they go to the primary, without an error
    (see :mod:`hermes_store.backends.read_route`). Writes always go to the
    primary. A SQLite store refuses ``read_url``.
    """

    def __init__(
        self,
        target: str | os.PathLike[str] | URL | None = None,
        *,
        policy: ContentionPolicy | None = None,
        durability: Durability | str = Durability.FULL,
        migrate: bool = True,
        read_only: bool = False,
        clock: Callable[[], float] = time.time,
        shared_commits: bool = False,
        read_url: str | os.PathLike[str] | URL | None = None,
        max_replica_lag: float = DEFAULT_MAX_LAG_S,
    ) -> None:
        # Checked before anything is touched: a wrong value creates no file.
        self.durability = Durability.of(durability)
        max_replica_lag = number_arg("max_replica_lag", max_replica_lag, minimum=0.0)
        if not isinstance(read_only, bool):
            raise InvalidInputError(f"read_only must be a bool, got {type(read_only).__name__}")
        self.read_only = read_only
        if not isinstance(shared_commits, bool):
            raise InvalidInputError(
                f"shared_commits must be a bool, got {type(shared_commits).__name__}"
            )
        self.clock = clock
        """What "now" is for the times this store writes (a test's clock, or ``time.time``)."""
        if policy is not None and not isinstance(policy, ContentionPolicy):
            raise InvalidInputError(
                f"policy must be a ContentionPolicy, got {type(policy).__name__}"
            )
        self.url: URL = resolve_url(target)
        self.path: Path | None = sqlite_file(self.url)
        self._failures = Failures.of(self.url)
        try:
            self.backend = backend_named(self.url.get_backend_name())
        except UnknownBackendError:
            raise InvalidInputError(
                f"{self._failures.where}: no database backend {self.url.get_backend_name()!r} "
                "(hermes_store runs on SQLite and PostgreSQL)"
            ) from None
        """The database's backend: every dialect decision of this store is its."""
        backend = self.backend
        self.policy = policy or ContentionPolicy()
        self.read_route: ReadRoute | None = None
        """Where read units go when ``read_url`` names a replica (None: all to the primary)."""
        self._replica_connections: ThreadConnections | None = None
        self._replica_failures = self._failures
        if read_url is not None:  # before the file is touched: SQLite refuses it
            self._open_read_route(read_url, max_replica_lag)
        if self.path is not None:
            backend.check_file(self.path, read_only=read_only)
            if not read_only:
                try:
                    backend.make_private(self.path, tighten=False)
                except OSError as error:
                    raise self._failures.from_os(error) from error
        self.engine: Engine = self._engine()
        self._connections = ThreadConnections(self.engine, backend.alive_check())
        if self.path is not None and not read_only:  # a replacement is made private, as here
            self._connections.adopting = lambda adopted: backend.make_private(
                Path(adopted), tighten=True
            )
        forking.watch(self.engine, self._connections)
        self._layouts: LayoutCell | None = None  # PostgreSQL: always our own layout
        self._open_schema(migrate and not read_only)
        self.shared: SharedCommits | None = None
        """The queue of shared commits (``shared_commits=True`` on SQLite), else None."""
        if shared_commits and self.path is not None and not read_only:
            self.shared = SharedCommits(
                lambda patience: self.write(patience_s=patience),
                self.policy.patience_s,
                self._where(),
                self._failures.translate,
            )

    def _open_read_route(
        self, read_url: str | os.PathLike[str] | URL, max_replica_lag: float
    ) -> None:
        """The replica's route and connections; its engine is made only where it may be used."""
        replica_url = resolve_url(read_url)
        if replica_url.get_backend_name() != self.url.get_backend_name():
            raise InvalidInputError(
                f"read_url is a {replica_url.get_backend_name()} URL, the store "
                f"{self._failures.where} a {self.url.get_backend_name()} one: a replica is a "
                "copy of the same database"
            )
        if replica_url == self.url:
            raise InvalidInputError(
                f"read_url names the store itself ({self._failures.where}), not a replica"
            )
        route = self.backend.open_read_route(
            self._engine(),
            replica_url,
            lambda url: _engine_for(url, self.policy, self.durability, True),
            max_replica_lag,
        )
        connections = ThreadConnections(route.engine, self.backend.alive_check())
        forking.watch(route.engine, connections)
        self.read_route = route
        self._replica_connections = connections
        self._replica_failures = Failures.of(replica_url)

    def _engine(self) -> Engine:
        try:
            return _engine_for(self.url, self.policy, self.durability, self.read_only)
        except NoSuchModuleError:
            raise InvalidInputError(
                f"{self._failures.where}: no database backend {self.url.get_backend_name()!r} "
                "(hermes_store runs on SQLite and PostgreSQL)"
            ) from None
        except ModuleNotFoundError as error:
            if (error.name or "").startswith("hermes_store"):
                raise  # our own packaging problem, not the caller's
            raise missing_driver(self._failures.where, self.url, error) from error

    def upgrade_to_head(self, on_step: StepReport | None = None) -> None:
        """Migrate the database if it is ours and behind (what opening does by default).

        The check is one read; Alembic is imported only when there is something
        to migrate; the upgrade is one write transaction, or with ``on_step``
        one per revision, each reported as ``on_step(revision, what, seconds)``
        (:func:`hermes_store.schema.migrate.upgrade_in_steps`). A file of the
        agent's own schema versions is left as it is.
        """
        if self.read_only:
            raise ReadOnlyStoreError(
                f"{self._where()} was opened read-only (read_only=True): it is not migrated"
            )
        self._open_schema(migrate=True, on_step=on_step)

    def _open_schema(self, migrate: bool, on_step: StepReport | None = None) -> None:
        """Read the file's schema state, migrate if it is ours and behind, learn its layout.

        On a file at our head this is one read, on this thread's kept
        connection, which the caller's first unit of work then reuses; Alembic
        is imported only when there is something to migrate. A file of the
        agent's own schema versions (7 and later) is never migrated: its
        layout is read and the repositories follow it.
        """
        if not self._learn_layout(migrate):
            from hermes_store.schema.migrate import upgrade, upgrade_in_steps

            try:
                if on_step is None:
                    upgrade(self.engine, "head")
                else:
                    upgrade_in_steps(self.engine, on_step)
            except Exception as error:  # damage, a full disk, a read-only folder ...
                named = self._failures.translate(error)
                if named is None:
                    raise
                raise named from error
            self._learn_layout(migrate=False)
        if not self.read_only:
            if self.path is not None:  # a session store, known now: private from here on
                try:
                    self.backend.make_private(self.path, tighten=True)
                except OSError as error:
                    raise self._failures.from_os(error) from error
            self._mend_skipped_agent_step()

    def _learn_layout(self, migrate: bool) -> bool:
        """Read state and layout in one read unit; False when a migration must come first."""
        backend = self.backend
        with UnitOfWork(self._connections, write=False, failures=self._failures) as uow:
            state = read_schema_state(uow.connection)
            ladder = state.ladder  # raises SchemaError for a state we cannot read safely
            if ladder is Ladder.AGENT and not backend.has_file_layout:
                raise SchemaError(
                    f"{self!r} holds schema_version {state.version}, which no hermes_store "
                    f"writes (it keeps the document's {HEAD_SCHEMA_VERSION}) and the agent's "
                    "own code does not use PostgreSQL: refusing to guess its schema"
                )
            if backend.has_file_layout and ladder is Ladder.EMPTY:
                refuse_foreign_file(uow.connection, self._where())
                if self.read_only and self.path is not None and backend.is_empty_file(self.path):
                    raise SchemaError(
                        f"{self._where()} is empty (0 bytes, no store); a read-only open "
                        "creates none: 'hermes-store upgrade' makes a new store there"
                    )
                if self.read_only:
                    raise SchemaError(
                        f"{self._where()} holds no session store yet, and a read-only open "
                        "creates none: run 'hermes-store upgrade' (or open it writable) first"
                    )
            if migrate and state.needs_migration:
                return False
            if backend.has_file_layout:
                cell = LayoutCell(STANDARD, state.cookie)
                # A file still to be migrated (by a caller that opened it with
                # migrate=False to do so itself) keeps the standard layout: the
                # first unit after the migration sees the cookie move and reads it.
                if self.read_only or not state.needs_migration:
                    backend.refresh_layout(cell, uow.connection, state)
                self._layouts = cell
                self._connections.on_replaced = cell.forget
        return True

    def _mend_skipped_agent_step(self) -> None:
        """Add ``messages.reasoning_content`` where our old schema_version 7 made the agent skip it.

        hermes_store releases before revision 0008 stamped ``schema_version = 7``.
        The agent's code at its versions 8 and 9, opening such a file, took the
        7 as its own ("reasoning_content added"), skipped that step and moved
        on -- and then failed every append for want of the column. Only a file
        that carries our ``alembic_version`` can be in that state; the agent's
        version 10 and later add missing columns themselves.
        """
        layout = self.layout
        if not (
            layout.ladder is Ladder.AGENT
            and layout.revision is not None
            and layout.schema_version in (7, 8, 9)
            and "reasoning_content" not in layout.message_columns
        ):
            return
        with self.write() as uow:
            if "reasoning_content" not in uow.layout.message_columns:
                uow.connection.exec_driver_sql(
                    "ALTER TABLE messages ADD COLUMN reasoning_content TEXT"
                )

    def _where(self) -> str:
        return str(self.path) if self.path is not None else repr(self)

    @property
    def layout(self) -> Layout:
        """The layout the store reads the file in (see :mod:`hermes_store.backends.layout`)."""
        if self._layouts is None:
            return STANDARD
        return self._layouts.layout

    @property
    def ladder(self) -> Ladder:
        """Whose version steps the file follows: ours, or the Hermes agent's own."""
        return self.layout.ladder

    def read(self) -> UnitOfWork:
        """A unit of work that only reads: one snapshot, no write lock.

        With a replica (``read_url``), on the replica when the route allows it
        (see the class docstring); else, and when it cannot begin there, on
        the primary.
        """
        route = self.read_route
        replica = self._replica_connections
        if route is not None and replica is not None and route.use_replica():
            return UnitOfWork(
                replica,
                write=False,
                layouts=self._layouts,
                failures=self._replica_failures,
                clock=self.clock,
                fallback=Fallback(self._connections, self._failures, route.note_down),
            )
        return UnitOfWork(
            self._connections,
            write=False,
            layouts=self._layouts,
            failures=self._failures,
            clock=self.clock,
        )

    def name_failure(self, error: BaseException) -> StoreError:
        """The store's error for a failure of its database met outside a unit of work.

        For work a unit cannot hold (VACUUM runs outside any transaction):
        named as a unit would name it -- damage, a full disk, a lost server --
        else a plain StoreError naming the database.
        """
        if isinstance(error, StoreError):
            return error
        named = self._failures.translate(error)
        return named if named is not None else StoreError(f"{self._where()}: {error}")

    def refuse_if_read_only(self) -> None:
        """ReadOnlyStoreError if this store may not write (for work that reads before it writes)."""
        if self.read_only:
            raise ReadOnlyStoreError(
                f"{self._where()} was opened read-only (read_only=True): nothing was written"
            )

    def write(self, *, patience_s: float | None = None) -> UnitOfWork:
        """A unit of work that writes; ``patience_s`` overrides the policy's lock budget."""
        self.refuse_if_read_only()
        if patience_s is not None:
            patience_s = number_arg("patience_s", patience_s, minimum=0.0)
        return UnitOfWork(
            self._connections,
            write=True,
            patience_s=patience_s,
            layouts=self._layouts,
            failures=self._failures,
            clock=self.clock,
            after_commit=None if self.read_route is None else self.read_route.note_write,
        )

    def transact(self, work: Callable[[UnitOfWork], _T], *, patience_s: float | None = None) -> _T:
        """``work(uow)`` in one write unit of work, committed; what it returns.

        The way a service runs a change it wants done whatever the contention:
        on PostgreSQL a unit the server aborted (a deadlock, a serialization
        failure) left nothing behind and is run again whole, after a jittered
        pause, within the patience (then StoreLockedError), as ``SessionDB``'s
        writes are. ``work`` must therefore do nothing but its unit's work
        (and never commit the unit itself: with shared commits it runs inside
        a transaction other calls share).

        A deadline the caller set for the call (:mod:`hermes_store.uow.deadline`:
        an asyncio write that waited for its turn) cuts the patience to what
        is left of it, so the patience bounds the whole call.
        """
        if patience_s is not None:
            patience_s = number_arg("patience_s", patience_s, minimum=0.0)
        deadline = deadlines.take()
        if deadline is not None:
            patience_s = deadlines.cut(patience_s, deadline)
        if self.shared is not None:
            return self.shared.run(work, patience_s)
        try:  # the first attempt inline: the common case pays for no retry machinery
            with self.write(patience_s=patience_s) as uow:
                return work(uow)
        except DBAPIError as error:

            def once() -> _T:
                with self.write(patience_s=patience_s) as uow:
                    return work(uow)

            return self.backend.retry_aborted(once, self.policy, self._failures.where, first=error)

    def close(self) -> None:
        """Close every idle connection, releasing the file; a later unit reconnects.

        The pool is emptied, not replaced (``engine.dispose`` would make a new
        pool, whose first connect re-runs the dialect's initialisation on the
        next open of the same database).
        """
        self._connections.close_all()
        self.engine.pool.dispose()
        if self._replica_connections is not None and self.read_route is not None:
            self._replica_connections.close_all()
            self.read_route.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Store({self.url.render_as_string(hide_password=True)!r})"
