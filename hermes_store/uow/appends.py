"""An append as shared-commit work: checked by its caller, written by a group's leader.

Both facades (``SessionDB`` on the caller's thread, ``AsyncSessionDB`` on the
event loop) queue appends through here, so the append path goes down from
the facades to the unit of work and never back up.
"""

from __future__ import annotations

from collections.abc import Sequence

from hermes_store.domain.messages import CheckedMessage, MessageIn
from hermes_store.uow.combined import Combinable
from hermes_store.uow.unit import UnitOfWork


def _append_checked(uow: UnitOfWork, messages: Sequence[CheckedMessage]) -> list[int]:
    """What the appends of one shared transaction run as: one statement for all of them."""
    return uow.messages.append_checked(messages)


def append_work(session_id: str, message: MessageIn) -> Combinable[CheckedMessage, int]:
    """``message``'s append for shared commits, its fields checked now.

    Checked where it is called (the caller's thread, or the event loop), so
    that a group's leader only writes; groups combine these into one INSERT.
    """
    return Combinable(_append_checked, message.checked(session_id))
