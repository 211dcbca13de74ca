"""Repositories: the documented operations and queries, one class per aggregate.

Each repository is bound to the connection of one unit of work and never
commits; the unit of work decides. Statements are built once at import and
reused, so a hot path pays only for binding and execution.
"""

from hermes_store.repositories.messages import MessageRepository
from hermes_store.repositories.search import SearchRepository
from hermes_store.repositories.sessions import SessionRepository

__all__ = ["MessageRepository", "SearchRepository", "SessionRepository"]
