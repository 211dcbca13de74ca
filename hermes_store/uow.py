"""Unit of work: one connection, one transaction, the repositories on top.

Agent code never touches an engine. It receives a :class:`UnitOfWorkFactory`
(usually a :class:`~hermes_store.store.Store`) and opens a unit of work per
logical operation::

    with store.write() as uow:
        uow.sessions.add(...)
        uow.messages.add(...)
    # committed here; an exception inside the block rolls everything back

A write unit begins with ``BEGIN IMMEDIATE`` (see :mod:`hermes_store.engine`),
so it either gets the lock up front, waits for it within the patience budget,
or raises :class:`~hermes_store.errors.StoreLockedError` before any statement
ran. A read unit begins a deferred transaction: it sees one consistent
snapshot and never takes the write lock.
"""

from __future__ import annotations

from types import TracebackType
from typing import Protocol

from sqlalchemy.engine import Connection, RootTransaction

from .connections import ThreadConnections
from .engine import PATIENCE_OPTION, READ_OPTION, after_write_commit
from .repositories import MessageRepository, SearchRepository, SessionRepository

_UNSET = object()


class UnitOfWork:
    """Owns one transaction; exposes ``sessions``, ``messages`` and ``search``."""

    sessions: SessionRepository
    messages: MessageRepository
    search: SearchRepository

    def __init__(
        self, connections: ThreadConnections, *, write: bool, patience_s: float | None = None
    ) -> None:
        self._connections = connections
        self._write = write
        self._patience_s = patience_s
        self._connection: Connection | None = None
        self._kept = False
        self._transaction: RootTransaction | None = None

    @property
    def connection(self) -> Connection:
        """The unit's connection, for queries no repository carries yet."""
        if self._connection is None:
            raise RuntimeError("the unit of work is not open; use it in a with-block")
        return self._connection

    def __enter__(self) -> UnitOfWork:
        connection, self._kept = self._connections.acquire()
        try:
            # A kept connection carries the previous unit's options (they are
            # set in place); both are set whenever they differ from this unit's.
            current = connection.get_execution_options()
            read, patience = not self._write, self._patience_s
            if (
                current.get(READ_OPTION) is not read
                or current.get(PATIENCE_OPTION, _UNSET) != patience
            ):
                connection.execution_options(**{READ_OPTION: read, PATIENCE_OPTION: patience})
            self._transaction = connection.begin()
        except BaseException:
            self._connections.release(connection, self._kept)
            raise
        self._connection = connection
        self.sessions = SessionRepository(connection)
        self.messages = MessageRepository(connection)
        self.search = SearchRepository(connection)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        try:
            if exc_type is None:
                self.commit()
            else:
                self.rollback()
        finally:
            if self._connection is not None:
                self._connections.release(self._connection, self._kept)
            self._connection = None

    def commit(self) -> None:
        if self._transaction is not None and self._transaction.is_active:
            self._transaction.commit()
            if self._write and self._connection is not None:
                after_write_commit(self._connection)
        self._transaction = None

    def rollback(self) -> None:
        if self._transaction is not None and self._transaction.is_active:
            self._transaction.rollback()
        self._transaction = None


class UnitOfWorkFactory(Protocol):
    """What services depend on: a way to open read and write units of work."""

    def read(self) -> UnitOfWork: ...

    def write(self, *, patience_s: float | None = None) -> UnitOfWork: ...
