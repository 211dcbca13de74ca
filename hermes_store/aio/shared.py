"""Shared-commit writes from an event loop: queued on the loop, no thread per call.

Handing each write to a worker thread that then waits in the queue of
shared commits (:mod:`hermes_store.uow.group`) costs two thread hand-offs
per call, and the waiting workers' wake-ups, all under one GIL: more than
twice the CPU per append of threads calling directly (design notes, "Shared
commits"). Here a
task's write is queued on the loop's own thread and awaited as a future;
one worker thread leads the groups (:meth:`SharedCommits.lead_queued`), and
each group's outcomes reach the loop in one ``call_soon_threadsafe``.

The rules of :mod:`hermes_store.aio.offload` hold: a call a group has
taken runs to its end whatever happens to its task (all or nothing); a
call cancelled while still queued is withdrawn and writes nothing; a call
still queued when its patience runs out (the leader waiting for another
process's lock) raises ``StoreLockedError``, nothing written.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from hermes_store.errors import StoreClosedError, StoreLockedError
from hermes_store.uow.group import SharedCall, SharedCommits
from hermes_store.uow.unit import UnitOfWork

_T = TypeVar("_T")


class _LoopInbox:
    """One loop's calls: outcomes settled once per group, patience watched, leaders on the pool.

    Each call has the future its task awaits, and, for a task that keeps the
    order of a session's writes, a function to call once the call has ended.
    Both are settled here, on the loop, by the one callback a group posts: no
    done-callbacks and no ``asyncio.shield`` per call (with them an append
    cost the loop five scheduled callbacks; now it costs its task's wake-up).
    A cancelled task cancels only its own future: the call runs on, and ends
    here like any other.

    Patience: one timer per loop, set for the earliest deadline among its
    unanswered calls (rather than a timer per call, which cost each append
    a heap push and a cancel on the loop). A call still queued at its
    deadline is withdrawn with ``StoreLockedError``; one a group has taken
    is left to its group.
    """

    __slots__ = ("_emptied", "_loop", "_pool", "_shared", "_timer", "_timer_at", "calls")

    def __init__(
        self, loop: asyncio.AbstractEventLoop, pool: ThreadPoolExecutor, shared: SharedCommits
    ) -> None:
        self._loop = loop
        self._pool = pool
        self._shared = shared
        self.calls: dict[SharedCall[Any], _Awaited] = {}
        """Every call of this loop that has not ended, in the order they were made."""
        self._emptied: asyncio.Future[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = math.inf

    def post(self, calls: list[SharedCall[Any]]) -> None:
        self._loop.call_soon_threadsafe(self._settle, calls)

    def lead(self, run: Callable[[], None]) -> None:
        try:
            self._pool.submit(run)
        except RuntimeError as error:  # shut down: the group's calls are answered, not left
            raise StoreClosedError(
                f"{self._shared.database}: the asyncio store was closed; the call did not run"
            ) from error

    def watch(self, call: SharedCall[Any], awaited: _Awaited) -> None:
        """On the loop: keep ``call`` until it ends; mind its deadline."""
        self.calls[call] = awaited
        if call.deadline < self._timer_at:
            self._arm(call.deadline)

    def _settle(self, calls: list[SharedCall[Any]]) -> None:
        for call in calls:
            self.end(call)

    def end(self, call: SharedCall[Any]) -> None:
        """On the loop: ``call`` has its outcome; hand it to its future (unless given up on)."""
        awaited = self.calls.pop(call, None)
        if awaited is None:
            return
        future, on_end = awaited
        if on_end is not None:
            on_end()
        if not future.done():
            error = call.error
            if error is None:
                future.set_result(call.result)
            elif isinstance(error, asyncio.CancelledError):
                future.cancel()
            else:
                future.set_exception(error)
        if not self.calls and self._emptied is not None:
            if not self._emptied.done():
                self._emptied.set_result(None)
            self._emptied = None

    async def drained(self) -> None:
        """Once every call of this loop has ended (whether or not its task still waits)."""
        while self.calls:
            if self._emptied is None:
                self._emptied = self._loop.create_future()
            await asyncio.shield(self._emptied)

    def _arm(self, deadline: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = deadline
        self._timer = self._loop.call_later(max(0.0, deadline - time.monotonic()), self._check)

    def _check(self) -> None:
        """At the earliest deadline: withdraw the calls out of patience, watch the rest."""
        self._timer, self._timer_at = None, math.inf
        now = time.monotonic()
        earliest = math.inf
        shared = self._shared
        for call in list(self.calls):
            if call.deadline > now:
                earliest = min(earliest, call.deadline)
                continue
            patience = call.patience_s
            error = StoreLockedError(
                shared.database, shared.default_patience_s if patience is None else patience, 0
            )
            if shared.withdraw(call, error):
                self.end(call)
        if earliest < math.inf:
            self._arm(earliest)


_Awaited = tuple["asyncio.Future[Any]", "Callable[[], None] | None"]
"""A call's future (what its task awaits) and what to call once the call has ended."""


class LoopWrites:
    """Submits an object's shared-commit writes from the loop and awaits their outcomes."""

    def __init__(self, shared: SharedCommits, pool: ThreadPoolExecutor) -> None:
        self._shared = shared
        self._pool = pool
        self._inboxes: dict[asyncio.AbstractEventLoop, _LoopInbox] = {}

    def start(
        self,
        work: Callable[[UnitOfWork], _T],
        patience_s: float | None,
        on_end: Callable[[], None] | None = None,
        deadline: float | None = None,
    ) -> tuple[asyncio.Future[_T], Callable[[], None]]:
        """Queue ``work`` now; (its outcome's future, a function withdrawing it if still queued).

        Await the future directly: cancelling it (a cancelled task does) leaves
        the call running; then call the withdrawing function, which takes the
        call back if no group has taken it yet (nothing of it is written) and
        does nothing otherwise. ``on_end`` is called on the loop once the call
        has ended, whichever way. ``deadline`` (``time.monotonic()``) is when
        its patience ends if it began before now (a write that waited for its
        session's turn); by default the patience counts from now.
        """
        loop = asyncio.get_running_loop()
        inbox = self._inboxes.get(loop)
        if inbox is None:
            inbox = self._inboxes[loop] = _LoopInbox(loop, self._pool, self._shared)
        future: asyncio.Future[_T] = loop.create_future()
        shared = self._shared
        call = shared.submit(
            work, patience_s, caller=id(asyncio.current_task()), inbox=inbox, deadline=deadline
        )
        inbox.watch(call, (future, on_end))

        def withdraw() -> None:
            if shared.withdraw(call, asyncio.CancelledError()):
                inbox.end(call)

        return future, withdraw

    async def drain(self) -> None:
        """Wait for this loop's writes already queued or running (before the pool is shut down)."""
        inbox = self._inboxes.get(asyncio.get_running_loop())
        if inbox is not None:
            await inbox.drained()
