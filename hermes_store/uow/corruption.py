"""Which driver errors mean "the file is damaged": the one rule, in one place.

A damaged page surfaces from SQLite as ``SQLITE_CORRUPT`` ("database disk image
is malformed", FTS5's ``SQLITE_CORRUPT_VTAB`` included) or, when the first
page is hit, ``SQLITE_NOTADB`` ("file is not a database"). PostgreSQL reports
damaged data and indexes as SQLSTATE ``XX001``/``XX002``. Anything that meets
one of these -- a unit of work, an open, a migration -- turns it into
:class:`~hermes_store.errors.StoreCorruptError` through :func:`corrupt_error`,
so callers never see "not found" or a driver class for a broken file.

Other foreign failures (disk full, read-only, ...) are classified elsewhere;
this module answers only "is it damage?", so the two sets of rules stay apart.
"""

from __future__ import annotations

from hermes_store.backends.sqlite.library import driver as sqlite3
from hermes_store.errors import StoreCorruptError

SQLITE_CORRUPT = 11
SQLITE_NOTADB = 26
_SQLITE_CODES = frozenset({SQLITE_CORRUPT, SQLITE_NOTADB})
_PG_SQLSTATES = frozenset({"XX001", "XX002"})  # data_corrupted, index_corrupted
# Drivers that carry no error code (older Pythons) still say it in words.
_SQLITE_WORDS = ("malformed", "file is not a database", "corrupt")


def _driver_error(error: BaseException) -> BaseException:
    """The driver's own exception behind a SQLAlchemy wrapper (or the error itself)."""
    original = getattr(error, "orig", None)
    return original if isinstance(original, BaseException) else error


def is_corruption(error: BaseException) -> bool:
    """True when ``error`` (a driver error, wrapped or not) says the database is damaged."""
    original = _driver_error(error)
    code = getattr(original, "sqlite_errorcode", None)
    if isinstance(code, int):
        return (code & 0xFF) in _SQLITE_CODES
    sqlstate = getattr(original, "sqlstate", None)
    if isinstance(sqlstate, str):
        return sqlstate in _PG_SQLSTATES
    if isinstance(original, sqlite3.DatabaseError):
        message = str(original).lower()
        return any(word in message for word in _SQLITE_WORDS)
    return False


def corrupt_error(error: BaseException, database: str) -> StoreCorruptError | None:
    """The store's error for ``error`` if it is damage, else None (re-raise the original)."""
    if isinstance(error, StoreCorruptError):
        return error
    if not is_corruption(error):
        return None
    original = _driver_error(error)
    detail = " ".join(str(original).split()) or type(original).__name__
    postgresql = isinstance(getattr(original, "sqlstate", None), str)
    return StoreCorruptError(database, detail, sqlite=not postgresql)
