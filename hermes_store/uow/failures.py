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

from hermes_store.backends import BACKENDS
from hermes_store.backends.base import Backend
from hermes_store.backends.location import sqlite_file
from hermes_store.errors import (
    StoreAccessError,
    StoreError,
    StoreFullError,
    StoreUnavailableError,
)
from hermes_store.uow.corruption import corrupt_error


@dataclass(frozen=True)
class Failures:
    """How failures of one store's database are named: its file or its URL."""

    where: str
    """The SQLite path, or the URL without its password."""
    path: Path | None
    """The SQLite file, to find out what exactly is read-only; None on a server."""
    server: str = ""
    """``HOST:PORT`` of a server, said when it cannot be reached; empty for a file."""
    backend: Backend | None = None
    """The backend that names the driver's errors (None: a dialect with no backend)."""

    @classmethod
    def of(cls, url: URL) -> Failures:
        backend = BACKENDS.get(url.get_backend_name())
        path = sqlite_file(url)
        if path is not None:
            return cls(str(path), path, "", backend)
        default = backend.default_port if backend is not None else None
        port = url.port or default
        server = f"{url.host or 'the local socket'}{f':{port}' if port else ''}"
        return cls(url.render_as_string(hide_password=True), None, server, backend)

    def translate(self, error: BaseException, *, connecting: bool = False) -> StoreError | None:
        """The store's error for ``error`` if the database itself failed, else None.

        ``connecting``: it was raised while a unit got its connection, before
        anything of the unit ran -- a server that refuses the connection was
        never reached, so "lost ... unless during its COMMIT" would mislead.
        The driver's own errors are named by the store's backend
        (:meth:`~hermes_store.backends.base.Backend.translate_error`).
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
        if isinstance(original, OSError):
            return self.from_os(original)
        if self.backend is None:
            return None
        return self.backend.translate_error(error, original, self, connecting=connecting)

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


def missing_driver(where: str, url: URL, error: ModuleNotFoundError) -> StoreUnavailableError:
    """The database's driver is not installed: say which extra brings it."""
    backend = BACKENDS.get(url.get_backend_name())
    hint = backend.missing_driver_hint if backend is not None else ""
    if hint:
        return StoreUnavailableError(f"cannot open {where}: {hint}")
    return StoreUnavailableError(f"cannot open {where}: its driver is not installed ({error})")


def _owner(path: str) -> str:
    """`` (owned by uid N)`` when someone else owns ``path``: the hint a denied chmod needs."""
    try:
        owner = os.stat(path).st_uid
    except OSError:
        return ""
    return "" if owner == os.getuid() else f" (owned by uid {owner}, not by this user)"
