"""Repositories: the documented operations and queries, one class per aggregate.

Each repository is bound to the connection of one unit of work and never
commits; the unit of work decides. Statements are built once, when a
repository's module is first imported, and reused, so a hot path pays only
for binding and execution. The names below are imported on first access
(PEP 562): a process that only searches never builds the sessions'
statements, and one that only reads a file's state builds none.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hermes_store.repositories.keeping import KeepingRepository
    from hermes_store.repositories.messages import MessageRepository
    from hermes_store.repositories.meta import MetaRepository
    from hermes_store.repositories.search import SearchRepository
    from hermes_store.repositories.sessions import SessionRepository

__all__ = [
    "KeepingRepository",
    "MessageRepository",
    "MetaRepository",
    "SearchRepository",
    "SessionRepository",
]

_MODULES = {
    "KeepingRepository": "keeping",
    "MessageRepository": "messages",
    "MetaRepository": "meta",
    "SearchRepository": "search",
    "SessionRepository": "sessions",
}


def __getattr__(name: str) -> Any:
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
