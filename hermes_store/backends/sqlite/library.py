"""Which SQLite library the store's connections run on, and whether it has the WAL-reset bug.

SQLite's WAL documentation describes a data race ("the WAL-reset bug") that
can corrupt a database or lose committed writes when two or more connections
share a WAL file and checkpoints run close together -- the store's everyday
workload. Every release from 3.7.0 through 3.51.2 has it; 3.51.3 and later
(3.52.0 too) are fixed, and so are the backports 3.44.6 and 3.50.7 within
their own lines.

Python's ``sqlite3`` links whatever library the platform ships, often an
affected one, so the store prefers the ``pysqlite3`` module, whose wheels
bundle a fixed release. :data:`driver` is the DB-API module every connection
of the store is opened with; the stdlib module is chosen only when its own
library is fixed, or when no fixed one can be had (then :data:`AFFECTED` is
true and the engine keeps new files out of WAL, as the agent does).

``HERMES_STORE_SQLITE=system`` forces the stdlib module (to compare the two,
or where a platform's own fixed build is wanted); ``bundled`` insists on
``pysqlite3`` and fails loudly without it; ``auto`` (the default) chooses.
"""

from __future__ import annotations

import importlib
import logging
import os
import threading
from types import ModuleType
from typing import TYPE_CHECKING

from hermes_store.errors import StoreError

__all__ = ["AFFECTED", "MODULE", "VERSION", "describe", "driver", "is_affected", "warn_once"]

_log = logging.getLogger(__name__)

LIBRARY_ENV = "HERMES_STORE_SQLITE"
"""The environment variable that picks the library: ``auto``, ``bundled`` or ``system``."""

FIRST_AFFECTED = (3, 7, 0)
FIRST_FIXED = (3, 51, 3)
FIXED_BACKPORTS = {(3, 44): (3, 44, 6), (3, 50): (3, 50, 7)}
"""Release lines that got the fix as a patch release: the first fixed one of each."""

WAY_OUT = (
    "pip install 'pysqlite3>=0.6.1' (it bundles a fixed SQLite) or link SQLite 3.51.3 or later"
)


def is_affected(version: tuple[int, ...]) -> bool:
    """True for a SQLite release that has the WAL-reset bug."""
    release = tuple(version[:3])
    if release < FIRST_AFFECTED or release >= FIRST_FIXED:
        return False
    backport = FIXED_BACKPORTS.get((release[0], release[1]))
    return backport is None or release < backport


def _version_info(module: ModuleType) -> tuple[int, ...]:
    return tuple(int(part) for part in str(module.sqlite_version).split(".")[:3])


def _bundled() -> ModuleType | None:
    try:
        return importlib.import_module("pysqlite3.dbapi2")
    except ImportError:
        return None


def _choose(preference: str) -> ModuleType:
    import sqlite3 as system

    if preference == "system":
        return system
    bundled = _bundled()
    if preference == "bundled":
        if bundled is None:
            raise StoreError(
                f"{LIBRARY_ENV}=bundled, but the pysqlite3 module is not installed: {WAY_OUT}"
            )
        return bundled
    if preference not in ("", "auto"):
        raise StoreError(
            f"{LIBRARY_ENV}={preference!r} is not a SQLite library choice: "
            "use auto, bundled or system"
        )
    candidates = [m for m in (bundled, system) if m is not None]
    fixed = [m for m in candidates if not is_affected(_version_info(m))]
    return (fixed or candidates)[0]


if TYPE_CHECKING:
    import sqlite3 as driver
else:
    driver = _choose(os.environ.get(LIBRARY_ENV, "auto").strip().lower())

VERSION: str = driver.sqlite_version
"""The release of the SQLite library the store's connections link."""
AFFECTED: bool = is_affected(_version_info(driver))
"""True when that release has the WAL-reset bug."""
MODULE: str = driver.__name__
"""The DB-API module's name: ``pysqlite3.dbapi2`` or ``sqlite3``."""


def describe() -> str:
    """One line for ``--version`` and ``check``: the release, its module, and the bug's verdict."""
    verdict = "has the WAL-reset bug" if AFFECTED else "free of the WAL-reset bug"
    return f"SQLite {VERSION} ({MODULE}), {verdict}"


_warned: set[str] = set()
_warned_lock = threading.Lock()


def warn_once(database: str) -> None:
    """Log, once per file and process, that this library can corrupt a shared WAL file."""
    if not AFFECTED:
        return
    with _warned_lock:
        if database in _warned:
            return
        _warned.add(database)
    _log.warning(
        "%s: the linked SQLite %s (%s) has the WAL-reset bug (releases 3.7.0 to 3.51.2, "
        "fixed in 3.51.3 and later and in 3.44.6 and 3.50.7), which can corrupt a WAL "
        "database shared by several processes; a new file is kept out of WAL. Way out: %s",
        database,
        VERSION,
        MODULE,
        WAY_OUT,
    )
