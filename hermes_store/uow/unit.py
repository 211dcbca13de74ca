"""Unit of work: one connection, one transaction, the repositories on top.

Agent code never touches an engine. It receives a :class:`UnitOfWorkFactory`
(usually a :class:`~hermes_store.uow.store.Store`) and opens a unit of work per
logical operation::

    with store.write() as uow:
        uow.sessions.create("s1", "cli")
        uow.messages.append("s1", MessageIn("user", "hello"))  # its counters move with it
    # committed here; an exception inside the block rolls everything back

A write unit begins with ``BEGIN IMMEDIATE`` (see :mod:`hermes_store.backends.sqlite.engine`;
on SQLite the unit sends it to the driver itself, which costs less than
SQLAlchemy's transaction bookkeeping on every append),
so it either gets the lock up front, waits for it within the patience budget,
or raises :class:`~hermes_store.errors.StoreLockedError` before any statement
ran. A read unit begins a deferred transaction: it sees one consistent
snapshot and never takes the write lock.

Whatever meets a damaged page inside a unit -- its begin, any statement, its
commit -- leaves it as :class:`~hermes_store.errors.StoreCorruptError`, after
the rollback: the one place every operation goes through, so no caller ever
sees "not found" or a success for a write that did not happen.

A unit also offers an ORM session, ``uow.orm`` (:mod:`hermes_store.uow.orm`),
made on first use on the unit's connection and inside its transaction; its
pending changes are flushed when the unit commits. A unit that never asks
for it pays one attribute test at its end.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

from sqlalchemy.engine import Connection, RootTransaction

from hermes_store.backends.base import Backend, DriverRules
from hermes_store.backends.layout import STANDARD, Layout, LayoutCell
from hermes_store.backends.options import BEGIN_OPTION, PATIENCE_OPTION, READ_OPTION
from hermes_store.backends.prepared import driver_error
from hermes_store.errors import StoreError
from hermes_store.uow.connections import KeptConnection, ThreadConnections
from hermes_store.uow.failures import Failures

if TYPE_CHECKING:
    # Imported where first used: the ORM and the mapped classes (``orm``) are a
    # quarter of ``import sqlalchemy`` again, and the repositories build their
    # statements at import -- a unit that never asks for them (``hermes-store
    # current``, a layout read) pays for neither.
    from hermes_store.repositories.keeping import KeepingRepository
    from hermes_store.repositories.messages import MessageRepository
    from hermes_store.repositories.meta import MetaRepository
    from hermes_store.repositories.search import SearchRepository
    from hermes_store.repositories.sessions import SessionRepository
    from hermes_store.uow.orm import UnitSession

_UNSET = object()
_SHARED_SAVEPOINT = "hermes_shared_call"


def load_repositories() -> None:
    """Import now the repositories a unit otherwise imports on first use.

    For a program with an event loop (:mod:`hermes_store.aio` calls this at
    its own import): an import in a worker thread holds the GIL for whole
    milliseconds at a time -- compiling a stale module, and ``dataclass``
    generating its methods through ``exec`` -- and stalls the loop for as
    long, at a process's first write (the measurement is in the design
    notes, "Shared commits"). The ORM (``uow.orm``) stays lazy: a large
    import of its own, paid only by units that use it.
    """
    import hermes_store.repositories.messages
    import hermes_store.repositories.search
    import hermes_store.repositories.sessions  # noqa: F401


@dataclass(frozen=True)
class Fallback:
    """Where a read unit meant for a replica begins instead when the replica fails it.

    Only the beginning falls back (the connect, the first statement's
    transaction): a replica that fails in the middle of a unit fails that
    unit, as a primary would; the route has marked it down for the next.
    """

    connections: ThreadConnections
    failures: Failures
    on_fallback: Callable[[BaseException], None]


class UnitOfWork:
    """Owns one transaction; exposes ``sessions``, ``messages`` and ``search``.

    On SQLite the transaction is begun and ended on the driver (see
    :class:`~hermes_store.backends.sqlite.engine.SqliteRules`); a Core statement run inside
    the unit finds it open, and the unit then ends it through SQLAlchemy so
    that both agree. Other backends use SQLAlchemy's transaction and events.
    """

    # Slots: a unit is made for every append, and a class with slots is made,
    # read and dropped for less than one with an instance dict.
    __slots__ = (
        "_after_commit",
        "_clock",
        "_connection",
        "_connections",
        "_driver",
        "_errors",
        "_failures",
        "_fallback",
        "_keeping",
        "_kept",
        "_layouts",
        "_messages",
        "_meta",
        "_orm",
        "_patience_s",
        "_rules",
        "_search",
        "_sessions",
        "_transaction",
        "_write",
        "layout",
    )

    layout: Layout
    """The file's layout as this unit's transaction sees it.

    See :mod:`hermes_store.backends.layout`.
    """

    def __init__(
        self,
        connections: ThreadConnections,
        *,
        write: bool,
        patience_s: float | None = None,
        layouts: LayoutCell | None = None,
        failures: Failures,
        clock: Callable[[], float] = time.time,
        fallback: Fallback | None = None,
        after_commit: Callable[[], None] | None = None,
    ) -> None:
        self._connections = connections
        self._fallback = fallback
        self._after_commit = after_commit
        self._clock = clock
        self._failures = failures
        self._write = write
        self._patience_s = patience_s
        self._layouts = layouts
        self._connection: Connection | None = None
        self._kept: KeptConnection | None = None
        self._rules: DriverRules | None = None
        self._driver: Any = None
        """The driver's connection where the unit runs its transaction itself (SQLite)."""
        self._errors: tuple[type[Exception], ...] = ()
        """The driver's errors, as its rules name them (none without rules)."""
        self._transaction: RootTransaction | None = None
        self._orm: UnitSession | None = None

    @property
    def backend(self) -> Backend:
        """The database's backend: what repositories ask for dialect-specific SQL and rules."""
        return self._connections.backend

    @property
    def connection(self) -> Connection:
        """The unit's connection, for queries no repository carries yet."""
        if self._connection is None:
            raise RuntimeError("the unit of work is not open; use it in a with-block")
        return self._connection

    @property
    def orm(self) -> UnitSession:
        """The unit's ORM session: entities on this connection, in this transaction.

        Made on first use and kept for the unit (see :mod:`hermes_store.uow.orm`
        for its rules): ``uow.orm.commit()`` only flushes -- the unit commits,
        once, when its block ends, after flushing what is still pending; an
        exception rolls everything back. In a read unit it reads and refuses
        to write (:class:`~hermes_store.errors.ReadOnlyUnitError`); on a file
        of the agent's own schema versions it writes nothing
        (:class:`~hermes_store.errors.SchemaError`).

        On SQLite the unit began its transaction on the driver, which
        SQLAlchemy's Connection does not know about: ``connection.begin()``
        makes it aware (the ``begin`` event finds the driver inside a
        transaction and sends nothing), so the session joins the unit's
        transaction instead of beginning, and committing, one of its own.
        """
        if self._orm is None:
            from hermes_store.uow.orm import open_unit_session

            connection = self.connection
            if not connection.in_transaction():
                if self._driver is None:
                    self._begin_through_sqlalchemy(connection)  # after an explicit commit
                else:
                    if not self._driver.in_transaction and self._rules is not None:
                        # After an explicit commit: the unit's own rules begin the next one.
                        self._rules.begin(
                            self._driver, write=self._write, patience_s=self._patience_s
                        )
                    connection.begin()
            self._orm = open_unit_session(
                connection,
                write=self._write,
                layout=self.layout,
                where=self._failures.where,
                sessions=self.sessions,
                messages=self.messages,
            )
        return self._orm

    def __enter__(self) -> UnitOfWork:
        fallback = self._fallback
        if fallback is None:
            return self._open()
        self._fallback = None
        try:
            return self._open()
        except Exception as error:  # the replica is down: the primary answers instead
            fallback.on_fallback(error)
            self._connections, self._failures = fallback.connections, fallback.failures
            return self._open()

    def _open(self) -> UnitOfWork:
        try:
            connection, self._kept = self._connections.acquire()
        except Exception as error:  # the connect itself: a missing, damaged or read-only file
            self._raise_named(error, connecting=True)
        try:
            backend = self._connections.backend
            kept = self._kept
            if kept is not None:  # read once per kept connection (ThreadConnections.acquire)
                rules, driver = kept.rules, kept.driver
            else:
                rules, driver = self._connections.driver_of(connection)
            self._rules, self._driver = rules, driver
            if rules is not None:
                self._errors = rules.errors
                rules.begin(driver, write=self._write, patience_s=self._patience_s)
                self._connection = connection
                cell = self._layouts
                layout = (
                    STANDARD
                    if cell is None
                    else backend.current_layout(cell, connection, driver, write=self._write)
                )
            else:
                self._begin_through_sqlalchemy(connection)
                layout = STANDARD  # a server: only our revisions build its tables
        except BaseException as error:
            self._connection = connection
            try:
                self._rollback_after(error)  # the layout read may have failed inside the unit
            finally:
                self._connection = None
                self._connections.release(connection, self._kept)
            self._raise_named(error)
        self._connection = connection
        self.layout = layout
        self._sessions: SessionRepository | None = None
        self._messages: MessageRepository | None = None
        kept = self._kept
        if kept is not None and kept.repositories is not None:
            # The previous unit's on this connection, when made for the same layout and clock.
            made_for, clock, self._sessions, self._messages = kept.repositories
            if made_for is not layout or clock is not self._clock:
                self._sessions = self._messages = None
        self._search: SearchRepository | None = None
        self._keeping: KeepingRepository | None = None
        self._meta: MetaRepository | None = None
        return self

    # The repositories are made on first use: an append needs two of the three.
    @property
    def sessions(self) -> SessionRepository:
        """Sessions: create, end, usage, titles, lineage, listings (see its class)."""
        if self._sessions is None:
            from hermes_store.repositories.sessions import SessionRepository

            self._sessions = SessionRepository(self.connection, self.layout, self._clock)
            self._keep_repositories()
        return self._sessions

    @property
    def messages(self) -> MessageRepository:
        """Messages: append with their counters, read back, clear (see its class)."""
        if self._messages is None:
            from hermes_store.repositories.messages import MessageRepository

            self._messages = MessageRepository(
                self.connection, self.layout, self.sessions, self._clock
            )
            self._keep_repositories()
        return self._messages

    def _keep_repositories(self) -> None:
        """Leave the unit's sessions and messages repositories to the next unit on its connection.

        They hold only the connection, the layout and the clock, so a unit
        that finds them made for its own layout and clock uses them as they
        are, instead of building both again for every append.
        """
        kept = self._kept
        if kept is not None:
            kept.repositories = (self.layout, self._clock, self._sessions, self._messages)

    @property
    def search(self) -> SearchRepository:
        """Full-text search over the messages (see its class)."""
        if self._search is None:
            from hermes_store.repositories.search import SearchRepository

            self._search = SearchRepository(self.connection, self.layout)
        return self._search

    @property
    def keeping(self) -> KeepingRepository:
        """Archive, pin, cleanup of many or empty sessions, finding sessions by id."""
        if self._keeping is None:
            from hermes_store.repositories.keeping import KeepingRepository

            self._keeping = KeepingRepository(
                self.connection, self.layout, self.sessions, self._clock
            )
        return self._keeping

    @property
    def meta(self) -> MetaRepository:
        """The ``state_meta`` key/value table the store shares with the agent."""
        if self._meta is None:
            from hermes_store.repositories.meta import MetaRepository

            self._meta = MetaRepository(self.connection, self.layout)
        return self._meta

    def _begin_through_sqlalchemy(self, connection: Connection) -> None:
        # A kept connection carries the previous unit's options (they are
        # set in place); both are set whenever they differ from this unit's.
        current = connection.get_execution_options()
        read, patience = not self._write, self._patience_s
        if current.get(READ_OPTION) is not read or current.get(PATIENCE_OPTION, _UNSET) != patience:
            connection.execution_options(**{READ_OPTION: read, PATIENCE_OPTION: patience})
        self._transaction = connection.begin()
        settings = current.get(BEGIN_OPTION)
        if settings is not None:
            settings(connection, self._write, patience)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        try:
            if exc is None:
                try:
                    driver = self._driver
                    connection = self._connection
                    if (
                        self._orm is None
                        and driver is not None
                        and connection is not None
                        and connection._transaction is None  # noqa: SLF001 -- never joined
                    ):
                        # :meth:`commit` inline for the unit's own transaction on the
                        # driver (an append's): the same steps, without its calls.
                        if driver.in_transaction:
                            try:
                                driver.execute("COMMIT")
                            except self._errors as error:
                                dialect = connection.dialect
                                raise driver_error(dialect, "COMMIT", (), error) from error
                            if self._write and self._rules is not None:
                                self._rules.after_write_commit(driver)
                    else:
                        self.commit()
                except BaseException as error:
                    self._rollback_after(error)  # a failed COMMIT may leave the transaction open
                    self._raise_named(error)
                if self._after_commit is not None:
                    self._after_commit()
            else:
                self._rollback_after(exc)
                named = self._failures.translate(exc)
                if named is not None:
                    raise named from exc
        finally:
            if self._connection is not None:
                self._connections.release(self._connection, self._kept)
            self._connection = None

    def _raise_named(self, error: BaseException, *, connecting: bool = False) -> NoReturn:
        """Raise the store's error for ``error`` (see :mod:`~hermes_store.uow.failures`), or it."""
        named = self._failures.translate(error, connecting=connecting)
        if named is None:
            raise error
        raise named from error

    def _rollback_after(self, error: BaseException) -> None:
        """Roll back after ``error``; if even that fails, drop the connection, not the error.

        The caller hears about the first failure, which says what went wrong;
        a connection whose rollback failed may still hold a transaction, so it
        is invalidated (a later unit gets a fresh one) rather than reused.
        """
        try:
            self.rollback()
        except Exception:
            if self._connection is not None and not self._connection.closed:
                self._connection.invalidate(error if isinstance(error, Exception) else None)

    def commit(self) -> None:
        """Commit what is open; a no-op when nothing is (an explicit commit already ran).

        On SQLite the connection's state decides, not a flag: whatever
        transaction is open on it -- the unit's own, or one SQLAlchemy began
        for statements run after an explicit commit -- is committed, so the
        kept connection never leaves a unit still inside a transaction.

        The ORM session's pending changes are flushed first, and the session
        ends with the commit (its entities stay usable, detached; ``uow.orm``
        after an explicit commit is a new session in the next transaction).
        """
        orm = self._orm
        if orm is not None:  # a unit that never asked for it pays this test only
            self._flush_orm(orm)
            self._orm = None
            try:
                self.commit()
            finally:
                _close_quietly(orm)
            return
        if self._driver is None:
            if self._transaction is not None and self._transaction.is_active:
                self._transaction.commit()
            return
        connection = self.connection
        if connection.in_transaction():  # SQLAlchemy joined (or began) the transaction
            connection.commit()
        elif self._driver.in_transaction:
            self._driver_end("COMMIT")
        else:
            return
        if self._write and self._rules is not None:
            self._rules.after_write_commit(self._driver)

    def rollback(self) -> None:
        """Roll back what is open, at both levels; a no-op when nothing is.

        A closed connection (``Store.close`` while an export was being read)
        holds nothing to roll back: its transaction ended with it. The ORM
        session ends with the rollback; its entities are detached.
        """
        orm = self._orm
        if orm is not None:
            self._orm = None
            try:
                self.rollback()
            finally:
                _close_quietly(orm)
            return
        if self._connection is None or self._connection.closed:
            return
        if self._driver is None:
            # Even when it is no longer active: a transaction SQLAlchemy deactivated
            # because its connection died must still be rolled back, or the
            # connection refuses to reconnect for every later unit of the thread.
            if self._transaction is not None:
                self._transaction.rollback()
            return
        connection = self.connection
        # Not in_transaction(): a transaction whose COMMIT failed is inactive but still
        # there, and SQLAlchemy refuses every later statement until it is rolled back.
        if connection.get_transaction() is not None:
            connection.rollback()
        if self._driver.in_transaction:
            self._driver_end("ROLLBACK")

    # ------------------------------------------------------------------
    # Savepoints of shared commits (hermes_store.uow.group): SQLite only, on the driver.
    # ------------------------------------------------------------------
    def flush_orm(self) -> None:
        """Flush the ORM session's pending changes now and end it; the transaction stays open.

        What a call sharing a transaction does at its end, so that its entities
        are written inside its own savepoint, not in a later call's.
        """
        orm = self._orm
        if orm is None:
            return
        self._orm = None
        try:
            self._flush_orm(orm)
        finally:
            _close_quietly(orm)

    def savepoint(self) -> None:
        """Open the savepoint one call of a shared transaction runs in."""
        self._driver_statement(f"SAVEPOINT {_SHARED_SAVEPOINT}")

    def release_savepoint(self) -> None:
        """Keep what the call did: its savepoint merges into the transaction."""
        self._driver_statement(f"RELEASE {_SHARED_SAVEPOINT}")

    def release_failed_savepoint(self) -> bool:
        """Undo the call that failed inside its savepoint; False if the transaction is gone.

        SQLite ends the whole transaction on some errors (a full disk, an I/O
        error): then there is no savepoint left to roll back to, and nothing
        of the transaction will commit.
        """
        orm = self._orm
        if orm is not None:  # its own savepoint is inside ours: ended first
            self._orm = None
            with contextlib.suppress(Exception):
                orm.rollback()
            _close_quietly(orm)
        driver = self._driver
        if driver is None or not driver.in_transaction:
            return False
        try:
            driver.execute(f"ROLLBACK TO {_SHARED_SAVEPOINT}")
            driver.execute(f"RELEASE {_SHARED_SAVEPOINT}")
        except self._errors:
            return False
        return bool(driver.in_transaction)

    def _driver_statement(self, statement: str) -> None:
        if self._driver is None:
            raise RuntimeError("shared commits run on SQLite units only")
        self._driver_end(statement)

    def _flush_orm(self, orm: UnitSession) -> None:
        """Flush what the ORM session holds and release its SAVEPOINT; the unit commits.

        A session whose flush failed earlier in the unit, and which nobody
        rolled back, is refused rather than committed around: the caller
        swallowed that error, and the unit's work may be half of what was meant.
        """
        transaction = orm.get_transaction()
        if transaction is not None and not transaction.is_active:
            raise StoreError(
                "uow.orm failed to flush earlier in this unit of work and was not rolled back "
                "(uow.orm.rollback()); the unit of work was rolled back: nothing of it was "
                "committed"
            )
        orm.commit()

    def _driver_end(self, statement: str) -> None:
        assert self._driver is not None
        try:
            self._driver.execute(statement)
        except self._errors as error:
            raise driver_error(self.connection.dialect, statement, (), error) from error


def _close_quietly(orm: UnitSession) -> None:
    """End an ORM session whose transaction the unit committed or rolled back.

    Only references are dropped (its entities are detached, not expired):
    there is nothing left for it to send. A failure here cannot change the
    unit's outcome, which is what the caller hears.
    """
    with contextlib.suppress(Exception):
        orm.close()


class UnitOfWorkFactory(Protocol):
    """What services depend on: a way to open read and write units of work."""

    def read(self) -> UnitOfWork: ...

    def write(self, *, patience_s: float | None = None) -> UnitOfWork: ...
