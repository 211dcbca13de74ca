"""Upkeep a long-lived program runs at start: prune by age now and then, vacuum rarely.

``maybe_auto_prune_and_vacuum`` is meant to be called on every start of the
agent, the gateway or a scheduled job, and to do real work seldom:

* it prunes (:mod:`hermes_store.uow.pruning`: short batches, pinned sessions
  spared) at most once per ``min_interval_hours``, judged by the
  ``last_auto_prune`` mark in ``state_meta`` -- the agent's own key, so the
  agent and this store share one schedule on one file;
* after a prune that deleted something, it vacuums when the last successful
  vacuum (``last_vacuum``) is ``min_vacuum_interval_days`` old or more, and
  records the time only once the vacuum succeeded: a failed one is tried
  again at the next call, not a month later;
* it returns what it did: ``{"skipped", "pruned", "vacuumed"}`` and, when
  the vacuum failed, ``"error"`` naming why (the prune stays done).
"""

from __future__ import annotations

from typing import Any

from hermes_store.domain.arguments import bool_arg, number_arg
from hermes_store.errors import StoreError
from hermes_store.uow.pruning import prune_in_batches
from hermes_store.uow.store import Store

LAST_PRUNE_KEY = "last_auto_prune"
"""The agent's ``state_meta`` key for its last automatic prune (epoch seconds as text)."""
LAST_VACUUM_KEY = "last_vacuum"
"""When the last vacuum that succeeded finished (epoch seconds as text)."""
SECONDS_PER_HOUR = 3600.0
SECONDS_PER_DAY = 86400.0


def _mark(store: Store, key: str) -> float | None:
    with store.read() as uow:
        raw = uow.meta.get(key)
    try:
        return None if raw is None else float(raw)
    except ValueError:
        return None  # a mark nobody can read is no mark: the work is due


def _record(store: Store, key: str, when: float) -> None:
    store.transact(lambda uow: uow.meta.set(key, repr(when)))


def vacuum(store: Store) -> None:
    """Give the space of deleted rows back, through the store's backend; records ``last_vacuum``."""
    store.refuse_if_read_only()
    try:
        store.backend.vacuum(store.engine, store.policy.patience_s)
    except StoreError:
        raise
    except Exception as error:
        raise store.name_failure(error) from error
    _record(store, LAST_VACUUM_KEY, store.clock())


def maybe_auto_prune_and_vacuum(
    store: Store,
    retention_days: float = 90,
    min_interval_hours: float = 24,
    vacuum_after: bool = True,
    min_vacuum_interval_days: float = 30,
) -> dict[str, Any]:
    """Prune sessions older than ``retention_days`` unless done lately; vacuum when due."""
    retention_days = number_arg("retention_days", retention_days, minimum=0.0)
    min_interval_hours = number_arg("min_interval_hours", min_interval_hours, minimum=0.0)
    vacuum_after = bool_arg("vacuum", vacuum_after)
    min_vacuum_days = number_arg("min_vacuum_interval_days", min_vacuum_interval_days, minimum=0.0)
    store.refuse_if_read_only()
    result: dict[str, Any] = {"skipped": False, "pruned": 0, "vacuumed": False}
    now = store.clock()
    last = _mark(store, LAST_PRUNE_KEY)
    if last is not None and now - last < min_interval_hours * SECONDS_PER_HOUR:
        result["skipped"] = True
        return result
    result["pruned"] = prune_in_batches(store, retention_days, None)
    _record(store, LAST_PRUNE_KEY, now)
    if not vacuum_after or result["pruned"] == 0:
        return result
    last_vacuum = _mark(store, LAST_VACUUM_KEY)
    if last_vacuum is not None and now - last_vacuum < min_vacuum_days * SECONDS_PER_DAY:
        return result
    try:
        vacuum(store)
    except StoreError as error:
        result["error"] = f"vacuum failed, to be tried again at the next call: {error}"
        return result
    result["vacuumed"] = True
    return result
