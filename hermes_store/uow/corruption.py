"""Which driver errors mean "the file is damaged": the one rule, in one place.

A damaged page surfaces from SQLite as ``SQLITE_CORRUPT`` ("database disk image
is malformed", FTS5's ``SQLITE_CORRUPT_VTAB`` included) or, when the first
page is hit, ``SQLITE_NOTADB`` ("file is not a database"). PostgreSQL reports
damaged data and indexes as SQLSTATE ``XX001``/``XX002``. Each backend knows
its own (``Backend.is_corruption``, in its ``failures`` module). Anything that meets
one of these -- a unit of work, an open, a migration -- turns it into
:class:`~hermes_store.errors.StoreCorruptError` through :func:`corrupt_error`,
so callers never see "not found" or a driver class for a broken file.

Other foreign failures (disk full, read-only, ...) are classified elsewhere;
this module answers only "is it damage?", so the two sets of rules stay apart.
"""

from __future__ import annotations

from hermes_store.backends import BACKENDS
from hermes_store.backends.base import Backend
from hermes_store.errors import StoreCorruptError


def _driver_error(error: BaseException) -> BaseException:
    """The driver's own exception behind a SQLAlchemy wrapper (or the error itself)."""
    original = getattr(error, "orig", None)
    return original if isinstance(original, BaseException) else error


def _damaged_in(original: BaseException) -> Backend | None:
    """The backend whose driver says ``original`` means damage (each knows its own codes)."""
    for backend in BACKENDS.values():
        if backend.is_corruption(original):
            return backend
    return None


def is_corruption(error: BaseException) -> bool:
    """True when ``error`` (a driver error, wrapped or not) says the database is damaged."""
    return _damaged_in(_driver_error(error)) is not None


def corrupt_error(error: BaseException, database: str) -> StoreCorruptError | None:
    """The store's error for ``error`` if it is damage, else None (re-raise the original)."""
    if isinstance(error, StoreCorruptError):
        return error
    original = _driver_error(error)
    backend = _damaged_in(original)
    if backend is None:
        return None
    detail = " ".join(str(original).split()) or type(original).__name__
    return StoreCorruptError(database, detail, sqlite=backend.has_file_layout)
