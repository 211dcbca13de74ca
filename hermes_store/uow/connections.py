"""One reusable connection per thread, so a unit of work costs a BEGIN, not a pool round.

Checking a connection out of SQLAlchemy's pool and back in (with its
reset-on-return rollback) costs more than an append's SQL on a local file.
An agent thread opens unit after unit on the same store, so each thread keeps
one :class:`~sqlalchemy.engine.Connection` between units. A connection is only
ever used by the thread that made it, and only ever runs one unit at a time:
a unit opened while the thread's connection is busy -- a write inside a
streaming export, say -- gets a spare connection from the pool, closed again
when that unit ends. Between units the kept connection holds no transaction,
so it pins no WAL snapshot and blocks no checkpoint. When the thread ends,
its connection goes back to the pool (a thread-per-request server does not
pile them up).

A child process must not use a connection its parent opened (SQLite forbids
carrying one across ``fork``), so a connection made in another process is
forgotten, not reused.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
import weakref
from collections.abc import Callable
from typing import Any

from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError

from hermes_store.backends import backend_of
from hermes_store.backends.base import DriverRules

_log = logging.getLogger("hermes_store")


class KeptConnection:
    """A thread's connection; returned to the pool when the thread's locals die."""

    __slots__ = (
        "__weakref__",
        "busy",
        "connection",
        "driver",
        "info",
        "pid",
        "pool_connection",
        "repositories",
        "rules",
    )

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self.pid = os.getpid()
        self.busy = False
        """A unit of work is running on it (its transaction may be the driver's alone)."""
        self.pool_connection: object = None
        """The pool's connection ``info``, ``rules`` and ``driver`` were read from: they hold
        while the Connection still runs on it (an invalidated one reconnects to another)."""
        self.info: dict[Any, Any] = {}
        self.rules: DriverRules | None = None
        self.driver: Any = None
        self.repositories: Any = None
        """What the units of work on this connection last built on it (see ``UnitOfWork``):
        the repositories hold nothing but the connection, the layout and the clock."""

    def refresh(self, backend: Any) -> None:
        """Read ``info``, ``rules`` and ``driver`` again if the Connection reconnected."""
        connection = self.connection
        current = connection._dbapi_connection  # noqa: SLF001 -- None once invalidated
        if current is not None and current is self.pool_connection:
            return
        pool_connection = connection.connection  # reconnects an invalidated one
        self.info = pool_connection.info
        self.rules = rules = backend.driver_rules(connection)
        self.driver = None if rules is None else pool_connection.driver_connection
        self.repositories = None
        self.pool_connection = pool_connection

    def close(self) -> None:
        if self.pid == os.getpid() and not self.connection.closed:
            with contextlib.suppress(SQLAlchemyError):
                self.connection.close()

    def __del__(self, _finalizing: Callable[[], bool] = sys.is_finalizing) -> None:
        # At interpreter exit the modules this needs may be gone already, and the
        # process's connections close with it: nothing to give back.
        if not _finalizing():
            self.close()


def _describe(engine: Engine) -> str:
    return backend_of(engine).database_name(engine.url)


class ThreadConnections:
    """Hands each thread its kept connection, or a spare one while that is busy.

    ``alive`` (PostgreSQL's) tells whether a kept connection still reaches its
    server before a unit runs on it; one that does not is invalidated, and
    SQLAlchemy gives the unit a fresh one (pre-pinged by the pool).
    """

    def __init__(self, engine: Engine, alive: Callable[[Connection], bool] | None = None) -> None:
        self._engine = engine
        self.database = _describe(engine)
        """How errors name the database: its file, or its URL without the password."""
        self._alive = alive
        self._local = threading.local()
        self._kept: weakref.WeakSet[KeptConnection] = weakref.WeakSet()
        self._lock = threading.Lock()
        self.backend = backend_of(engine)
        """The engine's backend (what ``uow.backend`` answers)."""
        self._watch = self.backend.file_watch(engine)
        """Notices a file replaced under the store (SQLite); None where there is no file."""
        self.adopting: Callable[[str], None] | None = None
        """Called with the path once a replacement proved to be a store, before it is used:
        a writable store makes it private there, as opening does (``OSError`` refuses it)."""
        self.on_replaced: Callable[[], None] | None = None
        """Called once connections moved to a file that replaced the store's (the store
        then forgets what it knew of the old file's layout)."""

    def acquire(self) -> tuple[Connection, KeptConnection | None]:
        """(connection, holder): give it back with :meth:`release` and the same holder.

        ``holder`` is the thread's kept connection, or None for a spare.

        A connection whose file was replaced at its path is moved to the file
        now there first (the backend's ``file_watch``: SQLite's, see
        :mod:`hermes_store.backends.sqlite.replacement`), or refused with
        :class:`~hermes_store.errors.StoreReplacedError`.
        """
        connection, kept = self._acquire()
        watch = self._watch
        try:
            # The test of KeptConnection.refresh inline: a call per unit saved.
            if kept is not None and connection._dbapi_connection is not kept.pool_connection:  # noqa: SLF001
                kept.refresh(self.backend)
            if watch is not None:
                info = None if kept is None else kept.info
                watch.follow(connection, self.adopting, self.on_replaced, info)
                if kept is not None and connection._dbapi_connection is not kept.pool_connection:  # noqa: SLF001
                    kept.refresh(self.backend)  # a replacement followed: a new connection
        except BaseException:
            self.release(connection, kept)
            raise
        return connection, kept

    def driver_of(self, connection: Connection) -> tuple[DriverRules | None, Any]:
        """The backend's driver rules for a spare ``connection`` and, with rules, its driver.

        A kept connection has them read once (:meth:`KeptConnection.refresh`),
        where a unit would otherwise reach them through ``Connection.info`` and
        the pool's proxy on every unit; a spare connection reads them now.
        """
        rules = self.backend.driver_rules(connection)
        return rules, None if rules is None else connection.connection.driver_connection

    def _acquire(self) -> tuple[Connection, KeptConnection | None]:
        kept: KeptConnection | None = getattr(self._local, "kept", None)
        if kept is not None and kept.pid == os.getpid() and not kept.connection.closed:
            if kept.busy:
                return self._engine.connect(), None  # the thread's own is busy: a spare
            if self._alive is not None and not self._alive(kept.connection):
                kept.connection.invalidate()  # the next statement reconnects
            kept.busy = True
            return kept.connection, kept
        kept = KeptConnection(self._engine.connect())
        kept.busy = True
        self._local.kept = kept
        with self._lock:
            self._kept.add(kept)
        return kept.connection, kept

    def release(self, connection: Connection, holder: KeptConnection | None) -> None:
        """Give back what :meth:`acquire` gave, from whichever thread ends the unit.

        The holder itself is passed back, not looked up again: a unit a
        generator held open may end in another thread, or after the thread
        kept a new connection (``Store.close`` closed the old one).
        """
        if holder is not None:
            holder.busy = False
        else:
            connection.close()

    def forget_inherited(self, close_idle: bool = True) -> list[KeptConnection]:
        """In a child after ``fork``: drop the parent's kept connections (see ``forking``).

        Idle SQLite ones are closed here (the child's SQLite lock bookkeeping
        must not count them); the rest -- busy in a parent thread, or a
        server's socket the parent still uses -- are returned, for the caller
        to keep referenced and never touch. ``close_idle=False`` keeps the idle
        ones too (see :mod:`~hermes_store.uow.forking`: a parent with other
        threads may have forked while one of them held a mutex of SQLite's).
        """
        untouchable = []
        with self._lock:
            inherited = [holder for holder in self._kept if holder.pid != os.getpid()]
        for holder in inherited:
            self._kept.discard(holder)
            if not close_idle or holder.busy or not self.backend.closes_idle_connections:
                untouchable.append(holder)
            elif not holder.connection.closed:
                with contextlib.suppress(SQLAlchemyError):
                    holder.connection.invalidate()
        return untouchable

    def close_all(self) -> None:
        """Return every kept connection to the pool (when no unit of work is running)."""
        with self._lock:
            kept = list(self._kept)
        for holder in kept:
            holder.close()
