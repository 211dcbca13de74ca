"""``AsyncStore``: the store's units of work, awaited from an event loop.

A unit of work is run whole on a worker thread (:meth:`AsyncStore.transact`,
:meth:`AsyncStore.read`): ``work(uow)`` is the same synchronous function a
thread would pass to :meth:`Store.transact <hermes_store.uow.store.Store.transact>`.
There is deliberately no ``async with astore.write() as uow``: such a unit
would hold the write lock across the awaits of whatever else the loop runs
(every other chat's work), for as long as the loop pleases, and each
repository call in it would be a thread hop of its own; a function run in
one hop holds the lock only for its own statements, and can share a commit.

Stores opened here use shared commits by default (SQLite): the writes of
concurrent tasks go into one transaction and one fsync (see
:mod:`hermes_store.uow.group`). A write is queued on the loop's thread, at
the moment it is awaited, so tasks' writes are taken in the order they were
made.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from types import TracebackType
from typing import Any, TypeVar

from sqlalchemy.engine import URL

from hermes_store.aio.offload import Offloader
from hermes_store.aio.shared import LoopWrites
from hermes_store.domain.arguments import number_arg
from hermes_store.errors import InvalidInputError
from hermes_store.uow.store import Store
from hermes_store.uow.unit import UnitOfWork

_T = TypeVar("_T")


class AsyncStore:
    """A :class:`~hermes_store.uow.store.Store` whose units of work are coroutines.

    Wraps an open store (``AsyncStore(store)``), or opens one off the loop
    (``await AsyncStore.open(path, ...)``, which takes every ``Store``
    option; ``shared_commits`` is True unless said otherwise). ``max_workers``
    is the size of its own pool of worker threads.
    """

    def __init__(self, store: Store, *, max_workers: int = 8) -> None:
        if not isinstance(store, Store):
            raise InvalidInputError(f"store must be a Store, got {type(store).__name__}")
        self._store = store
        self._offload = Offloader(max_workers, what=f"Async{store!r}")
        shared = store.shared
        self._writes = None if shared is None else LoopWrites(shared, self._offload.pool)

    @classmethod
    async def open(
        cls,
        target: str | os.PathLike[str] | URL | None = None,
        *,
        max_workers: int = 8,
        shared_commits: bool = True,
        **options: Any,
    ) -> AsyncStore:
        """Open (create, migrate) the store on a worker thread and wrap it."""
        store = await asyncio.to_thread(Store, target, shared_commits=shared_commits, **options)
        return cls(store, max_workers=max_workers)

    @property
    def store(self) -> Store:
        """The synchronous store underneath (for code that runs on threads)."""
        return self._store

    async def transact(
        self, work: Callable[[UnitOfWork], _T], *, patience_s: float | None = None
    ) -> _T:
        """``work(uow)`` in one write unit on a worker thread, committed; what it returns.

        The same contract as ``Store.transact``: all of it or nothing, the
        store's errors, ``patience_s`` for the lock. A task cancelled while
        this waits is cancelled; its unit still ends on the worker thread,
        committed or rolled back whole.
        """
        self._offload.refuse_if_closed()
        store = self._store
        shared = store.shared
        if shared is None:
            return await self._offload.call(store.transact, work, patience_s=patience_s)
        if patience_s is not None:
            patience_s = number_arg("patience_s", patience_s, minimum=0.0)
        assert self._writes is not None  # made with the store's shared commits
        future, withdraw = self._writes.start(work, patience_s)  # queued now: the awaits' order
        try:
            return await future  # cancelling it leaves the call running (see LoopWrites.start)
        except asyncio.CancelledError:
            withdraw()  # nothing written if no group took it yet; else it runs on
            raise

    async def read(self, work: Callable[[UnitOfWork], _T]) -> _T:
        """``work(uow)`` in one read unit (one snapshot, no lock) on a worker thread."""

        def run() -> _T:
            with self._store.read() as uow:
                return work(uow)

        return await self._offload.call(run)

    async def run(self, fn: Callable[..., _T], /, *args: Any, **kwargs: Any) -> _T:
        """Any other blocking call of the store's, on its workers (``fn(*args, **kwargs)``)."""
        return await self._offload.call(fn, *args, **kwargs)

    async def close(self) -> None:
        """Answer every call, stop the workers, release the store's connections.

        Calls made before it run to their end and are answered as usual; a
        call made once it has begun raises ``StoreClosedError``, nothing run.
        """
        await self._offload.close(None if self._writes is None else self._writes.drain)
        await asyncio.to_thread(self._store.close)

    async def __aenter__(self) -> AsyncStore:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"Async{self._store!r}"
