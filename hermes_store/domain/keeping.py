"""The rules of keeping a store tidy that need no database: what counts as empty, id search.

Kept apart from :mod:`hermes_store.repositories.keeping` so that the
facades can name the defaults without importing the repositories (which
build their statements at import; see :func:`hermes_store.uow.unit.load_repositories`).
"""

from __future__ import annotations

EMPTY_GRACE_SECONDS = 3600.0
"""How old an empty session must be before it counts as empty: a new one gets its first
message within moments, and a cleanup must not race the agent that just made it."""

LIKE_ESCAPE = "\\"


def like_escaped(value: str) -> str:
    """``value`` with LIKE's wildcards and the escape character taken literally."""
    for char in (LIKE_ESCAPE, "%", "_"):
        value = value.replace(char, LIKE_ESCAPE + char)
    return value
