"""A call's deadline, carried from where the call was made to the lock wait it ends in.

A write's patience bounds the whole call, not only its ``BEGIN IMMEDIATE``:
an asyncio write that first waits for its session's previous write (see
:mod:`hermes_store.aio.offload`) has spent part of its patience before it
reaches the store. Given a fresh patience there, five writes of one session
behind another process's lock took 1, 2, 3 ... seconds to fail at a
patience of 1 s. The caller sets the deadline where the call is made
(:func:`within`); :meth:`Store.transact <hermes_store.uow.store.Store.transact>`
takes it (:func:`take`) and cuts its unit's patience to what is left.

Only the first unit of the call is cut: a call that writes in several
units (a prune in batches) is bounded by its first wait, not killed halfway
through by a deadline meant for a single write. A context variable, so the
deadline belongs to the thread (or task) running the call and to no other.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextvars import ContextVar
from typing import TypeVar

_T = TypeVar("_T")

_deadline: ContextVar[float | None] = ContextVar("hermes_store_deadline", default=None)


def within(deadline: float, fn: Callable[[], _T]) -> _T:
    """``fn()`` with ``deadline`` (``time.monotonic()`` seconds) set for its first unit."""
    token = _deadline.set(deadline)
    try:
        return fn()
    finally:
        _deadline.reset(token)


def take() -> float | None:
    """The deadline set for this call's first unit (then cleared), or None."""
    deadline = _deadline.get()
    if deadline is not None:
        _deadline.set(None)
    return deadline


def cut(patience_s: float | None, deadline: float | None) -> float | None:
    """``patience_s`` cut to what is left until ``deadline`` (never below 0); as is without one."""
    if deadline is None:
        return patience_s
    left = max(0.0, deadline - time.monotonic())
    return left if patience_s is None else min(patience_s, left)
