"""PostgreSQL's failures in the store's terms: a server gone, a full disk, no resources.

:class:`~hermes_store.uow.failures.Failures` asks the store's backend to name
a driver error; this is PostgreSQL's answer, read from the SQLSTATE (and
from psycopg's class where a refused connection carries none).
"""

from __future__ import annotations

from sqlalchemy.exc import DBAPIError

from hermes_store.errors import StoreError, StoreFullError, StoreUnavailableError

# PostgreSQL's SQLSTATEs for a server that went away or cannot take the work now.
_GONE = ("08", "57P01", "57P02", "57P03")
_DISK_FULL = "53100"
_UNAVAILABLE = ("53",)  # insufficient resources: disk, memory, connections
DEFAULT_PORT = 5432
"""The port a server URL without one reaches (libpq's default), to name it."""


def postgresql_failure(
    error: BaseException,
    original: BaseException | None,
    where: str,
    server: str,
    *,
    connecting: bool,
) -> StoreError | None:
    """The store's error for a failure of a PostgreSQL store (None: not the server's failure)."""
    state = getattr(original, "sqlstate", None)
    invalidated = isinstance(error, DBAPIError) and error.connection_invalidated
    if connecting and _connection_lost(original, state):
        return StoreUnavailableError(
            f"could not connect to the server at {server} for {where} "
            f"({_first_line(original)}); nothing was done"
        )
    if invalidated or _connection_lost(original, state):
        return StoreUnavailableError(
            f"lost the connection to {where} ({_first_line(original)}); the unit "
            "of work was not committed unless this happened during its COMMIT"
        )
    if state == _DISK_FULL:
        return StoreFullError(f"{where}: the server's disk is full; nothing was written")
    if state is not None and state.startswith(_UNAVAILABLE):
        return StoreUnavailableError(f"{where}: {_first_line(original)}")
    return None


def _connection_lost(original: BaseException | None, state: str | None) -> bool:
    """A psycopg error that means the server or the connection to it went away."""
    if state is not None:
        return state.startswith(_GONE)
    # psycopg raises OperationalError without a SQLSTATE for a refused or broken connection.
    return type(original).__module__.startswith("psycopg") and (
        type(original).__name__ == "OperationalError"
    )


def _first_line(error: BaseException | None) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


_CORRUPT_SQLSTATES = frozenset({"XX001", "XX002"})  # data_corrupted, index_corrupted


def is_postgresql_corruption(original: BaseException) -> bool:
    """SQLSTATE ``XX001`` or ``XX002``: damaged data or a damaged index."""
    if isinstance(getattr(original, "sqlite_errorcode", None), int):
        return False
    sqlstate = getattr(original, "sqlstate", None)
    return isinstance(sqlstate, str) and sqlstate in _CORRUPT_SQLSTATES
