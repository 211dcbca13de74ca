"""Shared commits (group commit): one process's concurrent writes made durable by one flush.

At ``durability="full"`` a commit costs one fsync, and that is nearly all
of a small write's time. When several threads (or asyncio tasks, through
:mod:`hermes_store.aio`) of one process write at once, each waiting for the
previous one's fsync, the store can do what databases have done for decades:
the writes that arrive while a commit is in flight go into the *next*
transaction together and are made durable by its one commit.

How a call runs (:meth:`SharedCommits.run`, what ``Store.transact`` does on
a store opened with ``shared_commits=True``):

* it joins a FIFO queue; if no thread is leading, it leads;
* the leader begins one write unit (``BEGIN IMMEDIATE`` within its patience,
  the ordinary rules: other processes see one writer, as before), then runs
  the queued calls in order, with no savepoint and, where they are
  :class:`~hermes_store.uow.combined.Combinable` (``SessionDB``'s appends),
  several in one go; when a call fails, the group is rolled back, that call
  hears its own error and the others run in the next transaction (see
  :meth:`SharedCommits._run_group`); else the group commits once;
* every call returns only after the transaction holding it committed at the
  store's durability; a failed commit fails every call it held (nothing of
  them was written);
* a writer alone leads at once and commits at once, in a unit of its own,
  as without shared commits (see :meth:`SharedCommits.run`).

Gathering: the threads a group answered are usually back a moment later
with their next write. The next group waits for them, up to
:data:`_STRAGGLERS_S` (1 ms) and only while some have not written again, so
N concurrent writers settle into groups of N instead of alternating halves
(and so half as many fsyncs). A thread that has no company --
no group answered others with it -- never waits: it commits alone, at once.
Groups led for an event loop (:meth:`SharedCommits.lead_queued`) never
wait: a delivery wakes the loop's tasks together, and the loop runs every
one of them, each queuing its next write, before it blocks again and lets
the leading thread run -- the burst is already queued when the group takes
its calls, and the wait only delayed it (groups are as large without it;
the design notes, "Shared commits", have the runs).

Bounds: a group takes at most :data:`MAX_CALLS` calls and stops taking more
once it has held the lock for :data:`MAX_HOLD_S`, so another process waiting
for the lock waits for one bounded group, as it would for one long write.
A queued call that is still waiting when its own patience runs out (the
leader is waiting for another process's lock) leaves the queue and raises
:class:`~hermes_store.errors.StoreLockedError`, having written nothing.

Calls queued from an event loop (:mod:`hermes_store.aio.shared`) have no
thread waiting for them: their outcomes are posted to the loop's
:class:`Inbox`, one post per group, and when such a call heads the queue
with nobody leading, the inbox runs :meth:`SharedCommits.lead_queued` on a
worker thread of its own.

A call's work runs on the leader's thread, in the leader's unit of work.
It must therefore do only its unit's work (as ``Store.transact`` already
asks: on PostgreSQL it may be run again) and must not commit or roll back
the unit itself. SQLite only: on PostgreSQL the store runs every call in
its own transaction, as without shared commits (the server's own commit
machinery and the retry of aborted units stay as they are).
"""

from __future__ import annotations

import _thread
import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable
from enum import Enum
from typing import Any, Generic, Protocol, TypeVar, cast

from hermes_store.errors import StoreLockedError
from hermes_store.uow import forking
from hermes_store.uow.combined import Combinable
from hermes_store.uow.unit import UnitOfWork

_T = TypeVar("_T")

MAX_CALLS = 64
"""At most this many calls share one transaction."""
MAX_HOLD_S = 0.05
"""A group takes no further call once it has held the write lock this long."""
_STRAGGLERS_S = 0.001
"""How long a group waits for the threads the previous group answered (at most, once)."""
_POLL_S = 0.05
"""How often a queued call looks whether it should lead, whatever woke it."""


class _State(Enum):
    PENDING = "pending"  # queued, no group has taken it
    TAKEN = "taken"  # inside a running group: it ends with that group
    DONE = "done"  # its outcome is known (committed, or failed and undone)


class _Signal:
    """A one-waiter wake-up: ``set`` from any thread, ``wait`` consumes it.

    ``threading.Event`` builds a Condition and a lock of its own for every
    wait; one bare lock, held while nothing is signalled, does the same for
    a single waiter at a fraction of the CPU (it is taken and given once per
    call of every writer). A ``set`` before the ``wait`` is not lost.
    """

    __slots__ = ("_lock",)

    def __init__(self) -> None:
        self._lock = _thread.allocate_lock()
        self._lock.acquire()

    def set(self) -> None:
        with contextlib.suppress(RuntimeError):  # already set: nothing more to say
            self._lock.release()

    def clear(self) -> None:
        self._lock.acquire(False)

    def wait(self, timeout: float | None = None) -> bool:
        """True when it was set (and is clear again), False when ``timeout`` passed."""
        return self._lock.acquire(timeout=-1 if timeout is None else timeout)


class Inbox(Protocol):
    """Where the outcomes of calls no thread waits for go (an event loop's: ``hermes_store.aio``).

    ``post`` gets every such call of one delivery at once (one wake-up of the
    loop per group, not one per call); ``lead`` runs the given function on a
    thread of the inbox's own when a group must be led and no waiting thread can.
    Neither may block: the leader calls them.
    """

    def post(self, calls: list[SharedCall[Any]]) -> None: ...

    def lead(self, run: Callable[[], None]) -> None: ...


class SharedCall(Generic[_T]):
    """One call's place in the queue, and its outcome once known."""

    __slots__ = (
        "caller",
        "careful",
        "deadline",
        "error",
        "inbox",
        "patience_s",
        "result",
        "state",
        "wake",
        "work",
    )

    def __init__(
        self,
        work: Callable[[UnitOfWork], _T],
        patience_s: float | None,
        deadline: float,
        caller: int | None = None,
        inbox: Inbox | None = None,
    ) -> None:
        self.work = work
        self.caller = threading.get_ident() if caller is None else caller
        """Who made it (a thread, or a task): the next group waits for the last one's callers."""
        self.inbox = inbox
        """None: its thread waits (:meth:`SharedCommits.drive`); else its outcome is posted."""
        self.careful = False
        """Run alone in a savepoint of its own: it was in a combined run that failed."""
        self.patience_s = patience_s
        self.deadline = deadline
        self.state = _State.PENDING
        self.result: _T | None = None
        self.error: BaseException | None = None
        self.wake = _Signal()
        """Set when its outcome is known, or when it may lead (only its own thread waits)."""

    def answered(self) -> bool:
        """Its outcome is known; final once true, so it may be read without the mutex.

        The outcome is set before the state, and the state before its thread is woken.
        """
        return self.state is _State.DONE

    def outcome(self) -> _T:
        if self.error is not None:
            raise self.error
        return self.result  # type: ignore[return-value]


class SharedCommits:
    """The queue and leadership of one store's shared commits (see the module's docstring).

    ``open_unit(patience_s)`` opens a write unit of the store (not yet
    entered); ``patience_s(None)`` says what a call's patience is when it
    gave none; ``translate`` names a database failure as the store's error.
    The mutex is never held across I/O: only to queue, take and deliver.
    """

    def __init__(
        self,
        open_unit: Callable[[float | None], UnitOfWork],
        default_patience_s: float,
        database: str,
        translate: Callable[[BaseException], BaseException | None],
        *,
        max_calls: int = MAX_CALLS,
        max_hold_s: float = MAX_HOLD_S,
    ) -> None:
        self._open_unit = open_unit
        self._default_patience_s = default_patience_s
        self._database = database
        self._translate = translate
        self._max_calls = max_calls
        self._max_hold_s = max_hold_s
        self._queue: deque[SharedCall[Any]] = deque()
        self._leading = False
        self._awaited: set[int] = set()
        """Threads the last group answered that have not written again since."""
        self._gathering = False
        """The leader waits for them (:meth:`_take`); ``_arrival`` wakes it."""
        self._summoned = False
        """An inbox was asked to run :meth:`lead_queued` and it has not taken the lead yet."""
        self._arrival = _Signal()
        self._changed = threading.Lock()
        forking.watch_shared(self)
        self.groups = 0
        """Transactions committed (or attempted) by groups; calls / groups is the sharing."""
        self.calls = 0
        """Calls that ran inside a group."""

    def forget_the_parents_calls(self) -> None:
        """In a child after ``fork``: the parent's queued calls and leader are not ours.

        The threads that made them do not exist here; a leader flag or a
        lock inherited in the held state would stop every write of the child.
        """
        self._changed = threading.Lock()
        self._queue = deque()
        self._leading = False
        self._awaited = set()
        self._gathering = False
        self._summoned = False
        self._arrival = _Signal()

    @property
    def database(self) -> str:
        """How errors name the database."""
        return self._database

    @property
    def default_patience_s(self) -> float:
        """A call's patience when it gave none."""
        return self._default_patience_s

    @property
    def has_company(self) -> bool:
        """A hint, read without the mutex: will a call made now likely share a transaction?

        True while a group runs or calls are queued, or the last group's
        callers have not written again. A writer alone (False) may skip what
        only sharing needs; either way its call is run correctly.
        """
        return self._leading or bool(self._queue) or bool(self._awaited)

    @property
    def leading(self) -> bool:
        """A thread is running a group (or waiting for the lock to begin one)."""
        return self._leading

    @property
    def queued(self) -> int:
        """Calls waiting for a group to take them (for tests and monitoring)."""
        with self._changed:
            return len(self._queue)

    # ------------------------------------------------------------------
    def submit(
        self,
        work: Callable[[UnitOfWork], _T],
        patience_s: float | None,
        *,
        caller: int | None = None,
        inbox: Inbox | None = None,
        deadline: float | None = None,
    ) -> SharedCall[_T]:
        """Queue ``work`` without waiting; the returned call's outcome comes later.

        Without an ``inbox`` the caller's thread drives the call to its
        outcome (:meth:`drive`). With one, nobody waits: the outcome is posted to the
        inbox, and when nobody is leading the inbox is asked to run
        :meth:`lead_queued` (an event loop's tasks submit this way: no
        thread is handed a call, one leads their groups). Calls are taken in
        the order they were submitted. ``deadline`` (``time.monotonic()``)
        ends its patience earlier than ``patience_s`` from now would.

        An inbox that cannot lead (its worker threads were shut down) has
        every call of its own still queued answered with its error, this
        one included: none stays queued behind a leader that never comes, to
        be written later by another caller's group after it was told it failed.
        """
        call = self._new_call(work, patience_s, caller, inbox, deadline)
        summon = False
        with self._changed:
            self._enqueue(call)
            if inbox is not None and not self._leading and not self._summoned:
                self._summoned = summon = True
        if summon:
            try:
                inbox.lead(self.lead_queued)  # type: ignore[union-attr]
            except Exception as error:
                with self._changed:
                    self._summoned = False
                    self._refused(cast(Inbox, inbox), error)
                    if not self._leading:  # another inbox's call, or a thread's, may lead
                        self._wake_head()
        return call

    def _refused(self, inbox: Inbox, error: BaseException) -> None:
        """With the mutex held: ``inbox`` cannot lead; its queued calls end with ``error``."""
        ended = [c for c in self._queue if c.inbox is inbox]
        for call in ended:
            self._queue.remove(call)
            call.error, call.state = error, _State.DONE
        if ended:
            with contextlib.suppress(RuntimeError):  # its loop closed: nobody left to tell
                inbox.post(ended)

    def _new_call(
        self,
        work: Callable[[UnitOfWork], _T],
        patience_s: float | None,
        caller: int | None = None,
        inbox: Inbox | None = None,
        deadline: float | None = None,
    ) -> SharedCall[_T]:
        patience = self._default_patience_s if patience_s is None else patience_s
        until = time.monotonic() + patience
        if deadline is not None:
            until = min(until, deadline)
        return SharedCall(work, patience_s, until, caller, inbox)

    def _enqueue(self, call: SharedCall[Any]) -> None:
        """With the mutex held: queue ``call``; wake a gathering leader it completes."""
        self._queue.append(call)
        awaited = self._awaited
        awaited.discard(call.caller)
        if self._gathering and (not awaited or not isinstance(call.work, Combinable)):
            self._arrival.set()

    def withdraw(self, call: SharedCall[Any], error: BaseException) -> bool:
        """End a call no group has taken yet with ``error``; False if one has (it runs on).

        For a task cancelled, or out of patience, while its call is queued:
        the call then never runs, so nothing of it is written.
        """
        with self._changed:
            if call.state is not _State.PENDING:
                return False
            self._queue.remove(call)
            call.error, call.state = error, _State.DONE
            return True

    def lead_queued(self) -> None:
        """Lead groups while calls no thread waits for head the queue (an inbox's thread runs this).

        A thread's call at the head is woken to lead instead. With the queue
        empty it returns at once: an event loop's calls come in bursts (see
        the module's docstring, "Gathering"), so there is nobody to wait for.
        """
        while True:
            with self._changed:
                head = self._queue[0] if self._queue else None
                if self._leading or head is None:
                    self._summoned = False
                    return
                self._summoned = False
                if head.inbox is None:
                    head.wake.set()  # a thread waits for this one: it leads
                    return
                self._leading = True
            ended = False
            try:
                self._run_group(head, gather=False)
                ended = True
            finally:
                with self._changed:
                    self._leading = False
                    if not ended:
                        self._wake_head()

    def run(self, work: Callable[[UnitOfWork], _T], patience_s: float | None = None) -> _T:
        """``work(uow)`` in the next shared transaction, committed; what it returns.

        A call that finds nobody leading and nobody queued runs at once in a
        unit of its own, exactly as without shared commits (the common case of
        a writer alone pays two lock round trips for the sharing); calls that
        arrive meanwhile queue up and share the next transaction.
        """
        call: SharedCall[_T] | None = None
        with self._changed:  # once, whatever comes next: every taking of it is a switch risked
            alone = not self._leading and not self._queue and not self._awaited
            if alone:
                self._leading = True
            else:
                call = self._new_call(work, patience_s)
                self._enqueue(call)
                lead = not self._leading
                if lead:
                    self._leading = True
        if call is not None:
            if lead:
                self._lead_group(call)
            else:  # a fresh call's signal is clear: it is set when the outcome is known
                call.wake.wait(max(0.0, min(_POLL_S, call.deadline - time.monotonic())))
            return self.drive(call)
        try:
            with self._open_unit(patience_s) as uow:
                result = work(uow)
            self.groups += 1
            self.calls += 1
            return result
        finally:
            with self._changed:
                self._leading = False
                self._wake_head()

    def drive(self, call: SharedCall[_T]) -> _T:
        """Wait until ``call`` has its outcome, leading groups whenever nobody else does."""
        while True:
            if call.answered():
                return call.outcome()
            remaining = _POLL_S
            with self._changed:
                if call.state is _State.DONE:
                    return call.outcome()
                lead = not self._leading and call.state is _State.PENDING
                if lead:
                    self._leading = True
                elif call.state is _State.PENDING:
                    remaining = call.deadline - time.monotonic()
                    if remaining <= 0:
                        self._queue.remove(call)
                        raise StoreLockedError(
                            self._database, call.patience_s or self._default_patience_s, 0
                        )
                call.wake.clear()
            if not lead:
                # Each thread waits on its own call: a delivery wakes only its callers.
                # A queued call looks again every _POLL_S whatever wakes it, so no lost
                # wake-up can leave the queue without a leader.
                call.wake.wait(min(remaining, _POLL_S) if call.state is _State.PENDING else None)
                continue
            self._lead_group(call)

    def _lead_group(self, call: SharedCall[Any]) -> None:
        """Run one group headed by ``call``, having taken the lead; then hand the lead on."""
        try:
            self._run_group(call)
        finally:
            with self._changed:
                self._leading = False
                self._wake_head()

    def _wake_head(self) -> None:
        """With the mutex held and nobody leading: let the oldest queued call lead."""
        while self._queue:
            head = self._queue[0]
            if head.inbox is None:
                head.wake.set()
                return
            if self._summoned:
                return
            self._summoned = True
            try:
                head.inbox.lead(self.lead_queued)
            except Exception as error:  # its workers were shut down: its calls end here
                self._summoned = False
                self._refused(head.inbox, error)
            else:
                return

    # ------------------------------------------------------------------
    def _take(self, count: int, started: float, gather: bool) -> list[SharedCall[Any]]:
        """The next calls for this group (the queue's head and those combining with it), or [].

        Empty when the group is full or old. The threads the last group
        answered are likely on their way back with their next write: while
        some are missing (and for at most :data:`_STRAGGLERS_S` of the group)
        the group waits for them before it takes an empty queue's nothing or
        a combinable head alone, so that they share this commit's fsync and,
        when they combine, its statement.
        """
        room = self._max_calls - count
        if room <= 0 or (count and time.monotonic() - started >= self._max_hold_s):
            return []
        until = started + _STRAGGLERS_S
        while True:
            with self._changed:
                queue = self._queue
                waiting = gather and bool(self._awaited) and time.monotonic() < until
                if queue and not (waiting and isinstance(queue[0].work, Combinable)):
                    return self._pop(room)
                if not queue and not waiting:
                    return []
                self._arrival.clear()
                self._gathering = True
            self._arrival.wait(max(0.0, until - time.monotonic()))
            with self._changed:
                self._gathering = False

    def _pop(self, room: int) -> list[SharedCall[Any]]:
        """With the mutex held: the head, and the calls right behind it that combine with it."""
        queue = self._queue
        head = queue.popleft()
        head.state = _State.TAKEN
        taken = [head]
        work = head.work
        if isinstance(work, Combinable) and not head.careful:
            run_all = work.run_all
            while queue and len(taken) < room:
                after = queue[0].work
                if queue[0].careful or not (
                    isinstance(after, Combinable) and after.run_all == run_all
                ):
                    break
                call = queue.popleft()
                call.state = _State.TAKEN
                taken.append(call)
        return taken

    def _deliver(
        self,
        outcomes: list[tuple[SharedCall[Any], Any, BaseException | None]],
        answered: bool = False,
    ) -> None:
        posts: dict[Inbox, list[SharedCall[Any]]] = {}
        waiting: list[SharedCall[Any]] = []
        with self._changed:
            if answered:  # a group of one had no company to wait for
                self._awaited = {c.caller for c, _, _ in outcomes} if len(outcomes) > 1 else set()
            for call, result, error in outcomes:
                call.result, call.error, call.state = result, error, _State.DONE
                if call.inbox is None:
                    waiting.append(call)
                else:
                    posts.setdefault(call.inbox, []).append(call)
        # Woken outside the mutex: each wake-up is a system call, and a woken
        # thread's first step is to return, not to take the mutex.
        for call in waiting:
            call.wake.set()
        for inbox, calls in posts.items():
            inbox.post(calls)

    def _requeue(self, calls: list[SharedCall[Any]]) -> None:
        """Put calls whose transaction was lost back at the head, in their order."""
        with self._changed:
            for call in reversed(calls):
                call.state = _State.PENDING
                self._queue.appendleft(call)
                call.wake.set()

    def _named(self, error: BaseException) -> BaseException:
        named = self._translate(error)
        if named is not None:
            named.__cause__ = error
            return named
        return error

    def _run_group(self, leader: SharedCall[Any], gather: bool = True) -> None:
        """Begin one write unit, run queued calls in it, commit, deliver the outcomes.

        The calls run optimistically, with no savepoint, combinable ones in
        one go: a savepoint makes SQLite copy every page the group then
        changes to its sub-journal (even one savepoint around the group
        costs CPU on every append), and FTS5 writes its pending index data
        out as a segment at each one. When a call fails, nothing marks where
        it began: the transaction is rolled back, the failing call hears its
        error (a combined batch's calls are marked ``careful`` instead, to be
        told apart), and the group's other calls go back to the head of the
        queue for the next transaction (units may be run again:
        ``Store.transact`` asks that of them). A careful call runs alone in a
        savepoint of its own, so its failure undoes only itself.
        """
        patience = max(0.0, leader.deadline - time.monotonic())  # what is left of the leader's
        unit = self._open_unit(patience)
        try:
            unit.__enter__()
        except BaseException as error:  # the lock did not come within the leader's patience
            self._withdraw(leader, error)
            if not isinstance(error, Exception):
                raise
            return
        started = time.monotonic()
        taken: list[SharedCall[Any]] = []
        kept: list[tuple[SharedCall[Any], Any]] = []
        try:
            while batch := self._take(len(taken), started, gather):
                taken.extend(batch)
                if batch[0].careful:  # taken alone (see _pop)
                    call = batch[0]
                    unit.savepoint()
                    try:
                        result = call.work(unit)
                        unit.flush_orm()
                    except Exception as own:
                        if not unit.release_failed_savepoint():
                            self._lose_transaction(unit, taken, [call], own)
                            return
                        self._deliver([(call, None, self._named(own))])
                        continue
                    unit.release_savepoint()
                    kept.append((call, result))
                    continue
                try:
                    results = self._run_together(unit, batch)
                except Exception as error:
                    if len(batch) == 1:
                        self._lose_transaction(unit, taken, batch, error)
                    else:
                        for call in batch:
                            call.careful = True
                        self._lose_transaction(unit, taken, [], error)
                    return
                kept.extend(zip(batch, results, strict=True))
        except BaseException as error:
            # Not a call's failure (KeyboardInterrupt in the leader's thread, say):
            # nothing of the group is committed; the others run in the next one.
            self._requeue([c for c in taken if c.state is _State.TAKEN and c is not leader])
            self._withdraw(leader, error)
            with contextlib.suppress(Exception):
                unit.__exit__(type(error), error, error.__traceback__)
            raise
        self.groups += 1
        self.calls += len(kept)
        try:
            unit.__exit__(None, None, None)  # the one COMMIT (and fsync) of the group
        except BaseException as error:
            self._deliver([(c, None, error) for c, _ in kept])
            if not isinstance(error, Exception):
                raise
            return
        self._deliver([(c, result, None) for c, result in kept], answered=True)

    @staticmethod
    def _run_together(unit: UnitOfWork, batch: list[SharedCall[Any]]) -> list[Any]:
        """The batch's results: a call alone, or the combinable calls in one go."""
        if len(batch) == 1:
            results = [batch[0].work(unit)]
        else:
            head = batch[0].work
            assert isinstance(head, Combinable)  # only combinable calls are taken together
            payloads = [cast(Combinable[Any, Any], call.work).payload for call in batch]
            results = head.run_all(unit, payloads)
            if len(results) != len(batch):
                raise RuntimeError(f"{head.run_all!r} gave {len(results)} results for {len(batch)}")
        unit.flush_orm()
        return results

    def _lose_transaction(
        self,
        unit: UnitOfWork,
        taken: list[SharedCall[Any]],
        failed: list[SharedCall[Any]],
        error: Exception,
    ) -> None:
        """Roll the group back: ``failed`` hear ``error``, the others run in the next one.

        Also where an error that ends the whole transaction (SQLite does that
        on a full disk or an I/O error) leads. The others were not
        acknowledged: they go back to the head of the queue, in their order.
        """
        self._deliver([(call, None, self._named(error)) for call in failed])
        self._requeue([c for c in taken if c.state is _State.TAKEN])
        with contextlib.suppress(Exception):
            unit.__exit__(type(error), error, error.__traceback__)

    def _withdraw(self, leader: SharedCall[Any], error: BaseException) -> None:
        """The leader's own call ends with ``error``, wherever it is (queued or taken)."""
        with self._changed:
            if leader.state is _State.PENDING:
                self._queue.remove(leader)
            leader.error, leader.state = error, _State.DONE
            leader.wake.set()
        if leader.inbox is not None:
            leader.inbox.post([leader])
