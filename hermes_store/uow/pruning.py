"""Pruning many sessions in short write transactions, so no other writer waits long.

A prune of 40,000 sessions deletes most of a big file's messages, and every
deleted message also updates both FTS indexes: minutes of work. In one
transaction that holds SQLite's single write lock the whole time, and every
agent that tries to append a message waits (or times out). Here the work is
cut into batches, each its own write unit of work:

* the plan (one read) lists the prunable sessions oldest first, under a
  cutoff fixed once: every batch judges by the same instant, so the batches
  together delete what one transaction would;
* each session's cost is the characters of its messages' text, more for
  characters beyond ASCII (:data:`COST_PER_EXTRA_BYTE`), plus a fixed share
  per message (reads of a few hundred sessions at a time, outside any write
  lock). Deleting a message makes each FTS index tokenize its text again, so
  the text is what the time follows: counted in messages, batches of the
  same budget would differ in time many times over (a session's mean message
  length varies that much from session to session);
* a batch takes sessions until their cost reaches a budget, deletes those
  still prunable (a session reopened meanwhile stays) one at a time until
  its share of ``target_s`` has passed (:func:`_delete_batch`: the forecast
  still misjudges some sessions), and commits; the budget follows the time
  the last batch took, aiming at ``target_s``;
* a session that costs more than the budget is first emptied in slices of
  its oldest messages, one transaction each, its counters lowered with every
  slice (so they always agree with the rows); then it goes like any other.
  A session reopened while it is being emptied is left alone from then on --
  without the messages already deleted: the prune was asked for them;
* after each commit the pruner pauses before taking the lock again. SQLite
  has no queue for its lock: a waiting writer polls from its busy handler,
  ever more rarely the longer it has waited (see :func:`busy_poll_gap`), so a
  pruner that began its next batch at once would keep winning. The pause is
  at least ``pause_s`` and at least the gap between the polls of a writer that
  waited through the whole batch, so a waiter's next poll finds the lock
  free: its wait is one batch plus one poll gap. (A fixed pause is not
  enough: after a batch that ran long -- a slow disk, a starved CPU -- the
  waiters poll too rarely to see it, and one can wait through many batches;
  design notes, "Pruning");
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

TARGET_BATCH_S = 0.025
"""How long a batch should hold the write lock (the budget adapts to reach it).

Short, because the cost of deleting a message varies several fold (its
length, FTS5 merge work at commit): the batches that overshoot the target,
which set the longest wait, overshoot a smaller one by less.
"""
DELETE_SHARE = 0.5
"""The share of ``target_s`` a batch spends deleting; its FTS5 merge step and commit take the rest.

The commit (FTS5 writing out the pending deletes, the WAL flush) costs about
as long as the deletes (design notes, "Pruning").
"""
PAUSE_S = 0.030
"""The shortest pause between batches: longer than a waiting writer's early poll gaps."""
PAUSE_MARGIN_S = 0.010
"""Added to the poll gap, for the waiter's own wake-up and scheduling."""
BUSY_POLL_DELAYS_S = (0.001, 0.002, 0.005, 0.010, 0.015, 0.020, 0.025, 0.025, 0.025, 0.050, 0.050)
"""SQLite's default busy handler (``busy_timeout``): its sleeps in turn, then 100 ms each.

Every program that waits through ``busy_timeout`` -- this store, the agent's
code, Python's ``sqlite3.connect(timeout=...)`` -- polls on this schedule.
"""
BUSY_POLL_LAST_S = 0.100
COST_PER_MESSAGE = 200
"""A message's cost beyond its text, in characters: its row, index entries, FTS delete markers."""
COST_PER_EXTRA_BYTE = 16
"""What each UTF-8 byte beyond the first of a character adds to its cost, in characters.

Fitted by least squares on the field corpus (the fit is in the design
notes, "Pruning"): a CJK character (two extra bytes) is unindexed from the
trigram and CJK-pair indexes too, at many times the cost of a Latin one.
Counted in characters alone, batches of CJK sessions held the lock far
longer than their budget.
"""
FIRST_BUDGET = 20_000
"""The cost of the first batch, before any batch has been timed (tens of messages)."""
MIN_BUDGET, MAX_BUDGET = 200, 50_000_000
MAX_SESSIONS = 500
"""Sessions per batch at most, and per read of their sizes (their ids are bound variables)."""

Plan = tuple[dict[str, Any], list[tuple[str, int]]]
"""A prune's fixed cutoff (statement parameters) and its sessions, oldest first."""
Progress = Callable[[int, int], None]
"""Called after each committed batch with (sessions deleted so far, sessions still planned)."""


def prune_in_batches(
    store: Store,
    older_than_days: float = 90,
    source: str | None = None,
    *,
    plan: Plan | None = None,
    target_s: float = TARGET_BATCH_S,
    pause_s: float = PAUSE_S,
    first_budget: int = FIRST_BUDGET,
    after_batch: Progress | None = None,
) -> int:
    """Delete ended sessions started more than N days ago, in batches; how many went.

    ``plan`` is a :meth:`~hermes_store.repositories.sessions.SessionRepository.prune_plan`
    the caller already made (to show what goes): its cutoff is the prune's, and
    ``older_than_days`` and ``source`` are then not read.
    """
    store.refuse_if_read_only()
    if plan is None:
        with store.read() as uow:
            plan = uow.sessions.prune_plan(older_than_days, source)
    params, planned = plan
    pending = _costed(store, planned)
    deleted, budget = 0, first_budget
    while pending:
        position = 0
        while position < len(pending):
            batch = _take(pending, position, budget)
            position += len(batch)
            _, messages, cost = pending[position - 1]
            if len(batch) == 1 and cost > budget:
                per_message = cost / max(messages, 1)
                budget = _empty_in_slices(
                    store, batch[0], params, budget, per_message, target_s, pause_s
                )
            started = time.monotonic()
            went, consumed = store.transact(
                functools.partial(_delete_batch, batch, params, target_s * DELETE_SHARE)
            )
            deleted += went
            elapsed = time.monotonic() - started
            if consumed < len(batch):  # the clock cut it: what it did is what the budget buys
                position += consumed - len(batch)  # the sessions left head the next batch
                budget = sum(cost for _, _, cost in pending[position - consumed : position])
            budget = _next_budget(budget, elapsed, target_s)
            if after_batch is not None:
                after_batch(deleted, len(pending) - position)
            if position < len(pending):
                _pause(elapsed, pause_s)
        with store.read() as uow:  # the stragglers: prunable now under the same cutoff
            planned = uow.sessions.prune_candidates(params)
        pending = _costed(store, planned)
    return deleted


Costed = tuple[str, int, int]
"""A planned session: its id, its messages, and their cost (see :data:`COST_PER_MESSAGE`)."""


def _costed(store: Store, planned: Sequence[tuple[str, int]]) -> list[Costed]:
    """The planned sessions, in plan order, each with its messages and their cost."""
    costed: list[Costed] = []
    for start in range(0, len(planned), MAX_SESSIONS):
        ids = [session_id for session_id, _ in planned[start : start + MAX_SESSIONS]]
        with store.read() as uow:
            sizes = uow.sessions.text_sizes(ids)
        for session_id in ids:
            messages, characters, beyond_ascii = sizes.get(session_id, (0, 0, 0))
            cost = characters + COST_PER_EXTRA_BYTE * beyond_ascii
            costed.append((session_id, messages, cost + COST_PER_MESSAGE * max(messages, 1)))
    return costed


def _empty_in_slices(
    store: Store,
    session_id: str,
    params: dict[str, Any],
    budget: int,
    per_message: float,
    target_s: float,
    pause_s: float,
) -> int:
    """Delete a big session's messages a budget at a time; the budget it ends with.

    ``per_message`` is the session's mean cost of a message: a slice is as
    many of its oldest messages as the budget pays for.
    """
    while True:
        limit = max(1, int(budget / per_message))
        started = time.monotonic()
        removed = store.transact(functools.partial(_delete_slice, session_id, params, limit))
        elapsed = time.monotonic() - started
        if removed < limit:
            return budget
        budget = _next_budget(budget, elapsed, target_s)
        _pause(elapsed, pause_s)


def busy_poll_gap(waited_s: float) -> float:
    """The sleep before the next poll of a waiter that has waited ``waited_s`` (SQLite's)."""
    total = 0.0
    for delay in BUSY_POLL_DELAYS_S:
        if waited_s < total + delay:
            return delay
        total += delay
    return BUSY_POLL_LAST_S


def _pause(held_s: float, pause_s: float) -> None:
    """Leave the lock free long enough for a writer that waited ``held_s`` to poll and take it.

    ``pause_s`` 0 turns pausing off (tests that count batches, not waits).
    """
    if pause_s > 0:
        time.sleep(max(pause_s, busy_poll_gap(held_s) + PAUSE_MARGIN_S))


def _delete_batch(
    ids: Sequence[str], params: dict[str, Any], delete_s: float, uow: UnitOfWork
) -> tuple[int, int]:
    """One batch's unit of work: (sessions deleted, of ``ids`` consumed).

    The sessions go one at a time until ``delete_s`` has passed since the
    unit began, the clock read after each: the budget is a forecast from
    the text's size, and it misjudges some batches several-fold (CJK text
    and tool JSON cost more per character to unindex), each such batch
    holding the lock well past its target. Those left over head the next batch. At least
    one session goes, so the prune always moves on.
    (A named function: the loop's values bound, not captured.)
    """
    until = time.monotonic() + delete_s
    deleted = consumed = 0
    for session_id in ids:
        deleted += uow.sessions.prune_batch([session_id], params, tidy=False)
        consumed += 1
        if time.monotonic() >= until:
            break
    if deleted:
        uow.sessions.drop_unused_prompts()
    uow.sessions.merge_fts_step()
    return deleted, consumed


def _delete_slice(session_id: str, params: dict[str, Any], limit: int, uow: UnitOfWork) -> int:
    removed = uow.sessions.prune_slice(session_id, params, limit)
    uow.sessions.merge_fts_step()
    return removed


def _take(pending: Sequence[Costed], position: int, budget: int) -> list[str]:
    """The ids from ``position`` on whose cost fits the budget (one session at least)."""
    taken: list[str] = []
    spent = 0
    for session_id, _messages, cost in pending[position : position + MAX_SESSIONS]:
        if taken and spent + cost > budget:
            break
        taken.append(session_id)
        spent += cost
    return taken


def _next_budget(budget: int, elapsed_s: float, target_s: float) -> int:
    """The budget scaled by how far the last batch was from the target, at most 2x either way."""
    factor = 2.0 if elapsed_s <= 0 else min(2.0, max(0.5, target_s / elapsed_s))
    return int(min(MAX_BUDGET, max(MIN_BUDGET, budget * factor)))
