"""A database that failed, in the store's own words: which file or server, and what is wrong.

A caller of ``SessionDB`` or ``Store`` catches the store's classes
(:mod:`hermes_store.errors`), not sqlite3's, psycopg's or SQLAlchemy's: those
name no file, and "attempt to write a readonly database" does not say that
the *directory* is read-only. This is the one place that turns a driver or
operating-system error into one of them; the unit of work and the store call
it on the way out. Errors that are not about the database itself -- a
constraint a caller's own SQL broke, a query FTS5 rejects -- are left as they
are.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.engine import URL
from sqlalchemy.exc import DBAPIError, PendingRollbackError

from hermes_store.backends.location import sqlite_file
from hermes_store.backends.sqlite.library import driver as sqlite3
from hermes_store.errors import (
    StoreAccessError,
    StoreError,
    StoreFullError,
    StoreLockedError,
    StoreUnavailableError,
)
from hermes_store.uow.corruption import corrupt_error

# PostgreSQL's SQLSTATEs for a server that went away or cannot take the work now.
_PG_GONE = ("08", "57P01", "57P02", "57P03")
_PG_DISK_FULL = "53100"
_PG_UNAVAILABLE = ("53",)  # insufficient resources: disk, memory, connections
DEFAULT_PORTS = {"postgresql": 5432}
"""The port a server URL without one reaches (libpq's default), to name it."""


@dataclass(frozen=True)
class Failures:
    """How failures of one store's database are named: its file or its URL."""

    where: str
    """The SQLite path, or the URL without its password."""
    path: Path | None
    """The SQLite file, to find out what exactly is read-only; None on a server."""
    server: str = ""
    """``HOST:PORT`` of a server, said when it cannot be reached; empty for a file."""

    @classmethod
    def of(cls, url: URL) -> Failures:
        path = sqlite_file(url)
        if path is not None:
            return cls(str(path), path)
        default = DEFAULT_PORTS.get(url.get_backend_name())
        port = url.port or default
        server = f"{url.host or 'the local socket'}{f':{port}' if port else ''}"
        return cls(url.render_as_string(hide_password=True), None, server)

    def translate(self, error: BaseException, *, connecting: bool = False) -> StoreError | None:
        """The store's error for ``error`` if the database itself failed, else None.

        ``connecting``: it was raised while a unit got its connection, before
        anything of the unit ran -- a server that refuses the connection was
        never reached, so "lost ... unless during its COMMIT" would mislead.
        """
        if isinstance(error, StoreError):
            return None
        corrupt = corrupt_error(error, self.where)  # damage: one rule, corruption.py
        if corrupt is not None:
            return corrupt
        if isinstance(error, PendingRollbackError):  # the connection died earlier in the unit
            return StoreUnavailableError(
                f"lost the connection to {self.where} during this unit of work ({error}); "
                "nothing of it was committed"
            )
        original = error.orig if isinstance(error, DBAPIError) else error
        if isinstance(original, sqlite3.Error):
            return self._sqlite(original)
        if isinstance(original, OSError):
            return self.from_os(original)
        state = getattr(original, "sqlstate", None)
        invalidated = isinstance(error, DBAPIError) and error.connection_invalidated
        if connecting and _postgresql_connection_lost(original, state):
            return StoreUnavailableError(
                f"could not connect to the server at {self.server} for {self.where} "
                f"({_first_line(original)}); nothing was done"
            )
        if invalidated or _postgresql_connection_lost(original, state):
            return StoreUnavailableError(
                f"lost the connection to {self.where} ({_first_line(original)}); the unit "
                "of work was not committed unless this happened during its COMMIT"
            )
        if state == _PG_DISK_FULL:
            return StoreFullError(f"{self.where}: the server's disk is full; nothing was written")
        if state is not None and state.startswith(_PG_UNAVAILABLE):
            return StoreUnavailableError(f"{self.where}: {_first_line(original)}")
        return None

    def from_os(self, error: OSError) -> StoreError:
        """An operating-system error met while opening, creating or tightening the file."""
        subject = error.filename or self.where
        reason = error.strerror or str(error)
        if error.errno in (errno.EACCES, errno.EPERM):
            return StoreAccessError(f"{subject}: permission denied ({reason}){_owner(subject)}")
        if error.errno == errno.EROFS:
            return StoreAccessError(f"{subject}: the file system is read-only")
        if error.errno in (errno.ENOSPC, errno.EDQUOT):
            return StoreFullError(f"{subject}: the disk is full ({reason})")
        return StoreUnavailableError(f"cannot use {subject}: {reason}")

    def _sqlite(self, error: sqlite3.Error) -> StoreError | None:
        code = getattr(error, "sqlite_errorcode", None)
        primary = None if code is None else code & 0xFF
        detail = str(error)
        if primary == sqlite3.SQLITE_FULL:
            return StoreFullError(f"{self.where}: the disk is full ({detail}); nothing was written")
        if primary in (sqlite3.SQLITE_READONLY, sqlite3.SQLITE_PERM, sqlite3.SQLITE_AUTH):
            return StoreAccessError(self._cannot_write(detail))
        if primary == sqlite3.SQLITE_CANTOPEN:
            return (
                StoreAccessError(self._cannot_write(detail))
                if self._denied()
                else (StoreUnavailableError(f"cannot open {self.where} ({detail})"))
            )
        if primary == sqlite3.SQLITE_IOERR:
            return StoreUnavailableError(f"{self.where}: I/O error ({detail})")
        if primary in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
            return StoreLockedError(self.where, 0.0, 1)
        return None

    def _denied(self) -> bool:
        """True when this process may not write the file or the folder it lives in."""
        if self.path is None:
            return False
        folder = self.path.parent
        return not os.access(folder, os.W_OK) or (
            self.path.exists() and not os.access(self.path, os.R_OK | os.W_OK)
        )

    def _cannot_write(self, detail: str) -> str:
        """Which of file, folder or file system is read-only: SQLite only says "readonly"."""
        if self.path is None:
            return f"{self.where} refused the write ({detail})"
        folder = self.path.parent
        if _read_only_file_system(folder):
            return f"{self.where}: the file system is read-only ({detail})"
        if self.path.exists() and not os.access(self.path, os.W_OK):
            return f"{self.where} is read-only for this user{_owner(str(self.path))} ({detail})"
        if not os.access(folder, os.W_OK):
            return (
                f"{self.where}: its folder {folder} is read-only for this user, and SQLite "
                f"must create {self.path.name}-wal and -shm there ({detail})"
            )
        return f"{self.where} cannot be written ({detail})"


def missing_driver(where: str, url: URL, error: ModuleNotFoundError) -> StoreUnavailableError:
    """The database's driver is not installed: say which extra brings it."""
    if url.get_backend_name() == "postgresql":
        return StoreUnavailableError(
            f"cannot open {where}: the PostgreSQL driver psycopg is not installed "
            "(pip install 'hermes-store[postgresql]')"
        )
    return StoreUnavailableError(f"cannot open {where}: its driver is not installed ({error})")


def _postgresql_connection_lost(original: BaseException | None, state: str | None) -> bool:
    """A psycopg error that means the server or the connection to it went away."""
    if state is not None:
        return state.startswith(_PG_GONE)
    # psycopg raises OperationalError without a SQLSTATE for a refused or broken connection.
    return type(original).__module__.startswith("psycopg") and (
        type(original).__name__ == "OperationalError"
    )


def _read_only_file_system(folder: Path) -> bool:
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _owner(path: str) -> str:
    """`` (owned by uid N)`` when someone else owns ``path``: the hint a denied chmod needs."""
    try:
        owner = os.stat(path).st_uid
    except OSError:
        return ""
    return "" if owner == os.getuid() else f" (owned by uid {owner}, not by this user)"


def _first_line(error: BaseException | None) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
