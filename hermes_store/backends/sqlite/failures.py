"""SQLite's failures in the store's terms: a full disk, a read-only file, folder or file system.

:class:`~hermes_store.uow.failures.Failures` asks the store's backend to name
a driver error; this is SQLite's answer. SQLite says only "readonly" or
"unable to open", so the file, its folder and the file system are looked at
to say which of them refused.
"""

from __future__ import annotations

import os
from pathlib import Path

from sqlalchemy.exc import DBAPIError

from hermes_store.backends.sqlite.library import driver as sqlite3
from hermes_store.errors import (
    InvalidInputError,
    StoreAccessError,
    StoreError,
    StoreFullError,
    StoreLockedError,
    StoreUnavailableError,
)


def sqlite_failure(
    error: BaseException, original: BaseException | None, where: str, path: Path | None
) -> StoreError | None:
    """The store's error for a failure of a SQLite store (None: not the database's failure)."""
    if not isinstance(original, sqlite3.Error):
        if isinstance(error, DBAPIError) and error.connection_invalidated:
            return StoreUnavailableError(
                f"lost the connection to {where} ({first_line(original)}); the unit "
                "of work was not committed unless this happened during its COMMIT"
            )
        return None
    code = getattr(original, "sqlite_errorcode", None)
    primary = None if code is None else code & 0xFF
    detail = str(original)
    if primary == SQLITE_TOOBIG or (
        # The driver binds each argument itself, and says only "Error binding parameter"
        # when SQLite refuses a string longer than its limit (no code comes with it).
        isinstance(original, sqlite3.InterfaceError) and "binding parameter" in detail
    ):
        return InvalidInputError(
            f"{where}: a value or a row is too big for SQLite (at most {SQLITE_MAX_LENGTH:,} "
            f"bytes) ({detail}); nothing was written"
        )
    if primary == sqlite3.SQLITE_FULL:
        return StoreFullError(f"{where}: the disk is full ({detail}); nothing was written")
    if primary in (sqlite3.SQLITE_READONLY, sqlite3.SQLITE_PERM, sqlite3.SQLITE_AUTH):
        return StoreAccessError(_cannot_write(where, path, detail))
    if primary == sqlite3.SQLITE_CANTOPEN:
        return (
            StoreAccessError(_cannot_write(where, path, detail))
            if _denied(path)
            else (StoreUnavailableError(f"cannot open {where} ({detail})"))
        )
    if primary == sqlite3.SQLITE_IOERR:
        return StoreUnavailableError(f"{where}: I/O error ({detail})")
    if primary in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
        return StoreLockedError(where, 0.0, 1)
    return None


def _denied(path: Path | None) -> bool:
    """True when this process may not write the file or the folder it lives in."""
    if path is None:
        return False
    folder = path.parent
    return not os.access(folder, os.W_OK) or (
        path.exists() and not os.access(path, os.R_OK | os.W_OK)
    )


def _cannot_write(where: str, path: Path | None, detail: str) -> str:
    """Which of file, folder or file system is read-only: SQLite only says "readonly"."""
    if path is None:
        return f"{where} refused the write ({detail})"
    folder = path.parent
    if _read_only_file_system(folder):
        return f"{where}: the file system is read-only ({detail})"
    if path.exists() and not os.access(path, os.W_OK):
        return f"{where} is read-only for this user{owner_hint(str(path))} ({detail})"
    if not os.access(folder, os.W_OK):
        return (
            f"{where}: its folder {folder} is read-only for this user, and SQLite "
            f"must create {path.name}-wal and -shm there ({detail})"
        )
    return f"{where} cannot be written ({detail})"


def _read_only_file_system(folder: Path) -> bool:
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def owner_hint(path: str) -> str:
    """`` (owned by uid N)`` when someone else owns ``path``: the hint a denied chmod needs."""
    try:
        owner = os.stat(path).st_uid
    except OSError:
        return ""
    return "" if owner == os.getuid() else f" (owned by uid {owner}, not by this user)"


def first_line(error: BaseException | None) -> str:
    """The first line of a driver's message (or its class's name when it says nothing)."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


SQLITE_TOOBIG = 18
SQLITE_MAX_LENGTH = 1_000_000_000
"""SQLite's default limit on a string, a blob and a whole row, in bytes."""
SQLITE_CORRUPT = 11
SQLITE_NOTADB = 26
_CORRUPT_CODES = frozenset({SQLITE_CORRUPT, SQLITE_NOTADB})
# Drivers that carry no error code (older Pythons) still say it in words.
_CORRUPT_WORDS = ("malformed", "file is not a database", "corrupt")


def is_sqlite_corruption(original: BaseException) -> bool:
    """``SQLITE_CORRUPT`` (FTS5's ``SQLITE_CORRUPT_VTAB`` included) or ``SQLITE_NOTADB``."""
    code = getattr(original, "sqlite_errorcode", None)
    if isinstance(code, int):
        return (code & 0xFF) in _CORRUPT_CODES
    if isinstance(getattr(original, "sqlstate", None), str):
        return False
    if isinstance(original, sqlite3.DatabaseError):
        message = str(original).lower()
        return any(word in message for word in _CORRUPT_WORDS)
    return False
