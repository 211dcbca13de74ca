"""The store's exceptions: one family, each naming what was wrong.

Callers of the old ``sqlite3`` store caught ``ValueError`` for bad titles, so
input errors stay ``ValueError`` subclasses; a missing session is a
``LookupError``; a database that stayed locked is its own kind, because the
right reaction (retry later, tell the user) differs from a programming error.
"""

from __future__ import annotations

import time


class StoreError(Exception):
    """Base of every error raised on purpose by hermes_store."""


class InvalidInputError(StoreError, ValueError):
    """An argument was rejected before anything was written."""


class TitleConflictError(InvalidInputError):
    """The cleaned title already belongs to another session."""


class SessionExistsError(InvalidInputError):
    """``create_session`` was given an id that is already taken."""


class SessionNotFoundError(StoreError, LookupError):
    """The operation names a session id that is not in the store."""

    def __init__(self, session_id: str) -> None:
        super().__init__(f"no session with id {session_id!r}")
        self.session_id = session_id

    def __str__(self) -> str:
        return str(self.args[0])


class StoreLockedError(StoreError):
    """Another connection held the write lock for longer than the patience budget."""

    def __init__(self, database: str, waited_s: float, attempts: int) -> None:
        super().__init__(
            f"database {database} stayed locked by another writer for {waited_s:.2f} s "
            f"({attempts} attempts); nothing was written"
        )
        self.database = database
        self.waited_s = waited_s
        self.attempts = attempts


class SchemaError(StoreError):
    """The database's schema is one this package cannot read or bring to head."""


class SessionBusyError(StoreError):
    """Another Hermes process holds the session's compression lock: it is rewriting it.

    The agent's own code (schema v25) takes a lock in ``compression_locks``
    while it replaces a session's transcript with a compacted one; a message
    appended meanwhile would be lost in the rewrite, so the append is refused
    and nothing is written. Retry once the lock has expired.
    """

    def __init__(self, session_id: str, holder: str, until: float) -> None:
        super().__init__(
            f"session {session_id!r} is being compressed by another Hermes process "
            f"(lock held by {holder!r} for {max(until - time.time(), 0):.0f} s more); "
            "nothing was written: retry once it is done"
        )
        self.session_id = session_id
        self.holder = holder
        self.until = until


class ReadOnlyStoreError(StoreError):
    """A write was asked of a store opened with ``read_only=True``; nothing was written."""


class StoreNotFoundError(StoreError, FileNotFoundError):
    """A read-only open found no database at the path (reading never creates one)."""
