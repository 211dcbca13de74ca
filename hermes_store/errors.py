"""The store's exceptions: one family, each naming what was wrong.

Callers of the old ``sqlite3`` store caught ``ValueError`` for bad titles, so
input errors stay ``ValueError`` subclasses; a missing session is a
``LookupError``; a database that stayed locked is its own kind, because the
right reaction (retry later, tell the user) differs from a programming error.
A database that cannot be used (disk full, read-only, server gone) is an
``OSError`` as the operating system's own errors are. A damaged file is its
own kind again: it is never "not found", retrying cannot mend it, and the
message says what to do next, because the usual reflex (retry, or copy the
file) makes it worse. :mod:`hermes_store.uow.failures` turns the drivers' errors
into these.
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


class ReadOnlyUnitError(ReadOnlyStoreError):
    """A write was asked of a read unit of work (``store.read()``); nothing was written.

    Raised by the unit's ORM session (``uow.orm``) when it would flush a
    change: a read unit reads one snapshot and never takes the write lock.
    """


class StoreNotFoundError(StoreError, FileNotFoundError):
    """A read-only open found no database at the path (reading never creates one)."""


class StoreCorruptError(StoreError):
    """The database has damaged pages (or is not a database): the operation did not happen.

    Raised by any operation that meets the damage, read or write, instead of a
    driver error or a wrong answer; a write that raised it was rolled back.
    The message names the file and the way out.
    """

    def __init__(
        self, database: str, detail: str, *, sqlite: bool = True, way_out: str | None = None
    ) -> None:
        if way_out is not None:  # the damage has a way out of its own (see short_file)
            advice = way_out
        elif sqlite:
            way_out = (
                "stop the agents using it, keep the file, and either restore your latest "
                "backup ('hermes-store backup' makes them) or salvage what can be read: "
                f"'hermes-store recover --from {database} --to NEW.db'"
            )
            advice = f"{way_out} ('hermes-store check' shows what is damaged)"
        else:
            way_out = advice = (
                "restore it from your last pg_dump, or repair it with the server's tools"
            )
        super().__init__(f"{database} is damaged ({detail}); nothing was done: {advice}")
        self.database = database
        self.detail = detail
        self.way_out = way_out
        """What to do next, without pointing at ``check`` (which is what names it there)."""


class StoreReplacedError(StoreError):
    """The file at the store's path is no longer the one its connections opened.

    Raised instead of writing into (or reading from) a file that was moved
    away or deleted, when the store cannot switch to the file now at the path.
    """


class StoreClosedError(StoreError, RuntimeError):
    """The call was made on (or had not started when) an asyncio store object was closed.

    ``AsyncSessionDB.close()`` and ``AsyncStore.close()`` answer every call:
    those already made run to their end first; one made after ``close()``
    began never runs, and raises this, nothing written. A ``RuntimeError``
    too, as the thread pool's own refusal was before it had a name.
    """


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


class UnknownBackendError(InvalidInputError):
    """The database's dialect has no backend in this package (its name is in the message).

    A backend is a package under ``hermes_store/backends/`` registered in
    ``BACKENDS``; a URL of another database cannot be opened as a store.
    """
