"""Work that several callers' calls can do together, in one go, inside a shared transaction.

A shared transaction (:mod:`hermes_store.uow.group`) that holds eight
appends could run them as eight INSERTs; on SQLite each INSERT that writes
the FTS5 indexes makes each index write its pending data out as a segment
of its own, so the SQL of eight one-row INSERTs costs well more than that
of one eight-row INSERT (design notes, "Shared commits").
A :class:`Combinable` says how its callers' payloads are done together:
the group hands every queued call with the same ``run_all`` to it at once.

It is also a plain unit-of-work function (``work(uow)`` does its own
payload alone), so ``Store.transact`` runs it unchanged where nothing is
shared, and the group runs it alone when a combined run failed and it must
find out which call the failure belongs to.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Generic, TypeVar

if TYPE_CHECKING:
    from hermes_store.uow.unit import UnitOfWork

_P = TypeVar("_P")
_T = TypeVar("_T")


class Combinable(Generic[_P, _T]):
    """One call's ``payload`` and the function that does many such payloads in one unit.

    ``run_all(uow, payloads)`` must return one result per payload, in order,
    and either do all of them or raise (the unit then undoes all of them);
    it must not depend on which other payloads share its run.
    """

    __slots__ = ("payload", "run_all")

    def __init__(
        self, run_all: Callable[[UnitOfWork, Sequence[_P]], list[_T]], payload: _P
    ) -> None:
        self.run_all = run_all
        self.payload = payload

    def __call__(self, uow: UnitOfWork) -> _T:
        return self.run_all(uow, (self.payload,))[0]
