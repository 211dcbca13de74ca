"""Blocking calls run on worker threads of our own; the event loop only awaits them.

Every lock wait, flush and query of :mod:`hermes_store.aio` runs here, never
on the loop. Two rules make cancellation safe:

* a call, once handed to a worker, runs to its end whatever happens to the
  task that awaited it (``asyncio.shield``): a cancelled task's write is
  still committed, or rolled back, as a whole -- never half -- and the
  worker's connection is left clean for the next call;
* calls given the same ``key`` (a session id) start in the order they were
  made, each after the previous one has ended, so one session's messages
  are stored in the order of its calls even when its tasks run concurrently.

Closing (:meth:`Offloader.close`) answers every call: those made before it
run to their end first (a call waiting for its session's turn included); a
call made after it raises :class:`~hermes_store.errors.StoreClosedError`
and never runs. The pool is shut only once nothing can be handed to it any
more, so no caller ever meets the pool's own ``RuntimeError``.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ParamSpec, TypeVar

from hermes_store.errors import StoreClosedError

_P = ParamSpec("_P")
_T = TypeVar("_T")


def _retrieve(future: asyncio.Future[Any]) -> None:
    """Mark the outcome seen: a cancelled caller's error must not be logged as lost."""
    if not future.cancelled():
        future.exception()


class Offloader:
    """A small pool of worker threads and the order of keyed calls.

    SQLite writers serialise on the file's lock anyway (and, with shared
    commits, several pool threads' writes share one transaction); readers
    run in parallel, one connection per worker thread.
    """

    def __init__(
        self, max_workers: int = 8, name: str = "hermes-store-aio", what: str = "the store"
    ) -> None:
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix=name)
        self._tails: dict[str, asyncio.Future[None]] = {}
        self._what = what
        self._closed = False

    @property
    def closed(self) -> bool:
        """``close()`` has begun: no new call is taken."""
        return self._closed

    def refuse_if_closed(self) -> None:
        """StoreClosedError for a call made once ``close()`` has begun (it never runs)."""
        if self._closed:
            raise StoreClosedError(f"{self._what} was closed: the call did not run")

    def _run(self, loop: asyncio.AbstractEventLoop, fn: Callable[[], _T]) -> asyncio.Future[_T]:
        """``fn`` handed to a worker; the pool's refusal (shut down) named as the store's."""
        try:
            inner = loop.run_in_executor(self._pool, fn)
        except RuntimeError as error:  # only once shut down, which close() does last
            raise StoreClosedError(f"{self._what} was closed: the call did not run") from error
        inner.add_done_callback(_retrieve)
        return inner

    async def call(self, fn: Callable[_P, _T], /, *args: _P.args, **kwargs: _P.kwargs) -> _T:
        """``fn(*args, **kwargs)`` on a worker thread; it runs to its end even if cancelled."""
        self.refuse_if_closed()
        inner = self._run(asyncio.get_running_loop(), functools.partial(fn, *args, **kwargs))
        return await asyncio.shield(inner)

    async def ordered(
        self, key: str, fn: Callable[_P, _T], /, *args: _P.args, **kwargs: _P.kwargs
    ) -> _T:
        """Like :meth:`call`, started only after the previous call with ``key`` has ended.

        A task cancelled while it waits for its turn runs nothing (its call
        never started); one cancelled after that leaves its call running, and
        the next call with the key waits for it still.
        """
        loop = asyncio.get_running_loop()

        def start(ended: Callable[[], None]) -> tuple[asyncio.Future[_T], None]:
            inner = self._run(loop, functools.partial(fn, *args, **kwargs))
            inner.add_done_callback(lambda _inner: ended())
            return asyncio.shield(inner), None

        return await self.in_turn(key, start)

    async def in_turn(
        self,
        key: str,
        start: Callable[[Callable[[], None]], tuple[asyncio.Future[_T], Callable[[], None] | None]],
    ) -> _T:
        """``start(ended)`` once the previous call with ``key`` has ended; its future's outcome.

        ``start`` begins a call that runs elsewhere and gives the future to
        await -- one whose cancellation (a cancelled task's) leaves the call
        running -- and, if the call can still be taken back before it runs, a
        function doing that (a no-op once it cannot). It must see that
        ``ended()`` is called once the call has ended, however it ends: the
        next call with the key starts then. A call made before ``close()``
        runs when its turn comes, even after ``close()`` has begun: close
        waits for it.
        """
        self.refuse_if_closed()
        loop = asyncio.get_running_loop()
        previous = self._tails.get(key)
        mine: asyncio.Future[None] = loop.create_future()
        self._tails[key] = mine

        def release(_done: object = None) -> None:
            if not mine.done():
                mine.set_result(None)
            if self._tails.get(key) is mine:
                del self._tails[key]

        started = False
        try:
            if previous is not None and not previous.done():
                await asyncio.shield(previous)
            future, withdraw = start(release)
            started = True
            try:
                return await future
            except asyncio.CancelledError:
                if withdraw is not None:
                    withdraw()  # nothing written if it was still queued; else it runs on
                raise
        finally:
            if not started:
                if previous is None or previous.done():
                    release()
                else:  # our turn passes to the next caller when the previous one ends
                    previous.add_done_callback(release)

    @property
    def pool(self) -> ThreadPoolExecutor:
        """The worker threads (a leader of shared commits runs on one of them)."""
        return self._pool

    async def close(self, drain: Callable[[], Awaitable[None]] | None = None) -> None:
        """Take no new call; wait for every call made before (queued for its turn or running).

        Then stop the workers. Every keyed call's turn ends only after the
        previous one's has, so waiting for the turns still open is waiting
        for all of them; a call handed to the pool without a key is waited for
        by the pool's own shutdown. ``drain`` waits for the calls that lean on
        the pool without a turn of their own (shared-commit writes queued from
        the loop: a worker leads their groups), before it is shut.
        """
        self._closed = True
        while turns := [turn for turn in self._tails.values() if not turn.done()]:
            await asyncio.wait(turns)  # a cancelled close leaves them to run on
        if drain is not None:
            await drain()
        await asyncio.to_thread(self._pool.shutdown, wait=True)
