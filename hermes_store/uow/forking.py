"""After ``os.fork()``, a child never runs a unit of work on a connection its parent opened.

Stores on one database share one engine per process, so a child inherits the
parent's pool and every thread's kept connection. SQLite documents using a
connection carried across ``fork`` as a way to corrupt a file; a PostgreSQL
socket shared by two processes interleaves their traffic. So, in the child,
right after the fork:

* every pool is replaced by an empty one (SQLAlchemy's own recipe,
  ``engine.dispose(close=False)``), so units open connections of their own;
* the inherited SQLite connections that were idle are closed there: that
  touches no lock of the parent's (POSIX locks belong to a process) and
  clears the lock bookkeeping SQLite keeps per process, which the child's own
  connections would otherwise trust. A connection that another thread of the
  parent was using is left alone and kept referenced, never used or closed;
* PostgreSQL connections are never closed in the child (closing would end
  the parent's session on the server): they are kept referenced and unused.

:class:`~hermes_store.uow.connections.ThreadConnections` already ignores a kept
connection made in another process; this module handles the pool and the
inherited connections themselves. The queues of shared commits
(:mod:`hermes_store.uow.group`) are forgotten by the same hook: a call the
parent's leader was running is nobody's in the child.
"""

from __future__ import annotations

import os
import threading
import weakref
from typing import TYPE_CHECKING, Any, Protocol

from sqlalchemy.engine import Engine

from hermes_store.backends import backend_of

if TYPE_CHECKING:
    from hermes_store.uow.connections import ThreadConnections


class ForkedQueue(Protocol):
    """A queue of calls shared between threads (shared commits): the child drops the parent's."""

    def forget_the_parents_calls(self) -> None: ...


_ENGINES: weakref.WeakSet[Engine] = weakref.WeakSet()
_CONNECTIONS: weakref.WeakSet[ThreadConnections] = weakref.WeakSet()
_SHARED: weakref.WeakSet[ForkedQueue] = weakref.WeakSet()
_INHERITED: list[Any] = []
"""What the child must neither use nor close: referenced so that no finalizer touches it."""


def watch(engine: Engine, connections: ThreadConnections) -> None:
    """Have a child process forget ``engine``'s pool and ``connections`` after a fork."""
    _ENGINES.add(engine)
    _CONNECTIONS.add(connections)


def watch_shared(shared: ForkedQueue) -> None:
    """Have a child process forget ``shared``'s queue and leader after a fork."""
    _SHARED.add(shared)


_PARENT_THREADS = [1]
"""How many threads the parent had when it forked (read in the child)."""


def _count_the_parents_threads() -> None:
    _PARENT_THREADS[0] = threading.active_count()


def _forget_the_parents_connections() -> None:
    # With other threads in the parent, one may have held a mutex of SQLite's
    # own (its allocator's) at the fork: closing a connection in the child
    # would then wait on it forever (seen: sqlite3_free in the child's dispose).
    # The child calls into SQLite only through its own new connections, and
    # keeps the inherited ones referenced, untouched, as it keeps busy ones.
    close_idle = _PARENT_THREADS[0] <= 1
    for shared in list(_SHARED):
        shared.forget_the_parents_calls()
    for connections in list(_CONNECTIONS):
        _INHERITED.extend(connections.forget_inherited(close_idle))
    for engine in list(_ENGINES):
        if close_idle and backend_of(engine).closes_idle_connections:
            engine.dispose()  # closes the idle ones, here in the child
        else:
            _INHERITED.append(engine.pool)  # never closed by the child
            engine.dispose(close=False)


os.register_at_fork(
    before=_count_the_parents_threads, after_in_child=_forget_the_parents_connections
)
