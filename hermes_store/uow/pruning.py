"""Pruning many sessions in short write transactions, so no other writer waits long.

A prune of 40,000 sessions deletes most of a big file's messages, and every
deleted message also updates both FTS indexes: minutes of work. In one
transaction that holds SQLite's single write lock the whole time, and every
agent that tries to append a message waits (or times out). Here the work is
cut into batches, each its own write unit of work:

* the plan (one read) lists the prunable sessions oldest first with their
  stored message counts, under a cutoff fixed once: every batch judges by the
  same instant, so the batches together delete what one transaction would;
* a batch takes sessions until their messages reach a budget, deletes those
  still prunable (a session reopened meanwhile stays), and commits; the
  budget follows the time the last batch took, aiming at ``target_s``;
* a session with more messages than the budget is first emptied in slices of
  its oldest messages, one transaction each, its counters lowered with every
  slice (so they always agree with the rows); then it goes like any other.
  A session reopened while it is being emptied is left alone from then on --
  without the messages already deleted: the prune was asked for them;
* after each commit the pruner pauses ``pause_s`` before taking the lock
  again. SQLite has no queue for its lock: a waiting writer polls from its
  busy handler (every 25-50 ms after the first ~100 ms), so a pruner that
  began its next batch at once would keep winning. The pause lets a waiter's
  next poll find the lock free; its wait is then about one batch plus one
  poll interval, well under 200 ms;
* when the plan is done, the sessions that became prunable meanwhile (ended
  during the prune, started before the cutoff) are listed again and pruned
  the same way, until none is left.

The count returned is the number of sessions deleted, as before. On
PostgreSQL the same batches keep row locks short; each batch is retried
whole like any other write (:meth:`~hermes_store.uow.store.Store.transact`).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from typing import Any

from hermes_store.uow.store import Store
from hermes_store.uow.unit import UnitOfWork

TARGET_BATCH_S = 0.050
"""How long a batch should hold the write lock (the budget adapts to reach it)."""
PAUSE_S = 0.030
"""The pause between batches: longer than a waiting writer's poll interval early on."""
FIRST_BUDGET = 400
"""Messages in the first batch, before any batch has been timed."""
MIN_BUDGET, MAX_BUDGET = 20, 50_000
MAX_SESSIONS = 500
"""Sessions per batch at most (their ids are bound variables)."""

Progress = Callable[[int, int], None]
"""Called after each committed batch with (sessions deleted so far, sessions still planned)."""


def prune_in_batches(
    store: Store,
    older_than_days: float = 90,
    source: str | None = None,
    *,
    target_s: float = TARGET_BATCH_S,
    pause_s: float = PAUSE_S,
    first_budget: int = FIRST_BUDGET,
    after_batch: Progress | None = None,
) -> int:
    """Delete ended sessions started more than N days ago, in batches; how many went."""
    store.refuse_if_read_only()
    with store.read() as uow:
        params, pending = uow.sessions.prune_plan(older_than_days, source)
    deleted, budget = 0, first_budget
    while pending:
        position = 0
        while position < len(pending):
            batch = _take(pending, position, budget)
            position += len(batch)
            if len(batch) == 1 and pending[position - 1][1] > budget:
                budget = _empty_in_slices(store, batch[0], params, budget, target_s, pause_s)
            started = time.monotonic()
            deleted += store.transact(functools.partial(_delete_batch, batch, params))
            budget = _next_budget(budget, time.monotonic() - started, target_s)
            if after_batch is not None:
                after_batch(deleted, len(pending) - position)
            if position < len(pending) and pause_s > 0:
                time.sleep(pause_s)
        with store.read() as uow:  # the stragglers: prunable now under the same cutoff
            pending = uow.sessions.prune_candidates(params)
    return deleted


def _empty_in_slices(
    store: Store,
    session_id: str,
    params: dict[str, Any],
    budget: int,
    target_s: float,
    pause_s: float,
) -> int:
    """Delete a big session's messages a budget at a time; the budget it ends with."""
    while True:
        started = time.monotonic()
        removed = store.transact(functools.partial(_delete_slice, session_id, params, budget))
        elapsed = time.monotonic() - started
        if removed < budget:
            return budget
        budget = _next_budget(budget, elapsed, target_s)
        if pause_s > 0:
            time.sleep(pause_s)


def _delete_batch(ids: Sequence[str], params: dict[str, Any], uow: UnitOfWork) -> int:
    """One batch's unit of work (a named function: the loop's values bound, not captured)."""
    return uow.sessions.prune_batch(ids, params)


def _delete_slice(session_id: str, params: dict[str, Any], limit: int, uow: UnitOfWork) -> int:
    return uow.sessions.prune_slice(session_id, params, limit)


def _take(pending: Sequence[tuple[str, int]], position: int, budget: int) -> list[str]:
    """The ids from ``position`` on whose messages fit the budget (one session at least)."""
    taken: list[str] = []
    messages = 0
    for session_id, count in pending[position : position + MAX_SESSIONS]:
        if taken and messages + count > budget:
            break
        taken.append(session_id)
        messages += max(count, 1)
    return taken


def _next_budget(budget: int, elapsed_s: float, target_s: float) -> int:
    """The budget scaled by how far the last batch was from the target, at most 2x either way."""
    factor = 2.0 if elapsed_s <= 0 else min(2.0, max(0.5, target_s / elapsed_s))
    return int(min(MAX_BUDGET, max(MIN_BUDGET, budget * factor)))
