"""Repositories: the documented operations and queries, one class per aggregate.

Each repository is bound to the connection of one unit of work and never
commits; the unit of work decides. Statements are built once at import and
reused, so a hot path pays only for binding and execution.
"""

from .messages import MessageRepository
from .search import SearchRepository
from .sessions import SessionRepository

__all__ = ["MessageRepository", "SearchRepository", "SessionRepository"]
