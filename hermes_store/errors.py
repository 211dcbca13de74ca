"""The store's exceptions: one family, each naming what was wrong.

Callers of the old ``sqlite3`` store caught ``ValueError`` for bad titles, so
input errors stay ``ValueError`` subclasses; a missing session is a
``LookupError``; a database that stayed locked is its own kind, because the
right reaction (retry later, tell the user) differs from a programming error.
A database that cannot be used (disk full, read-only, server gone) is an
``OSError`` as the operating system's own errors are; a damaged file is its
own kind again, because retrying cannot mend it. :mod:`hermes_store.failures`
turns the drivers' errors into these.
"""

from __future__ import annotations


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

    def __init__(
        self, database: str, waited_s: float, attempts: int, pauses_s: tuple[float, ...] = ()
    ) -> None:
        super().__init__(
            f"database {database} stayed locked by another writer for {waited_s:.2f} s "
            f"({attempts} attempts); nothing was written"
        )
        self.database = database
        self.waited_s = waited_s
        self.attempts = attempts
        self.pauses_s = pauses_s
        """The jittered pauses slept between the attempts, in order (for diagnosis)."""


class SchemaError(StoreError):
    """The database's schema is one this package cannot read or bring to head."""


class StoreUnavailableError(StoreError, OSError):
    """The database cannot be used as asked right now: I/O error, server gone, cannot open.

    Nothing of the failed call was committed, except when the connection to a
    server was lost during the COMMIT itself (the message then says so).
    """


class StoreFullError(StoreUnavailableError):
    """The disk (or the server's) is full; nothing of the failed call was written."""


class StoreAccessError(StoreUnavailableError):
    """This user may not write or change the file: it, its folder or the file system is
    read-only, or it belongs to another user."""


class StoreDamagedError(StoreError):
    """The file is not a SQLite database, or its pages are damaged: retrying cannot help."""
