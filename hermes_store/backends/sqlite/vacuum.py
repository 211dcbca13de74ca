"""``VACUUM`` of a SQLite file: the free pages given back, then the WAL truncated.

VACUUM cannot run inside a transaction and rewrites every page through the
WAL, so it runs on a connection of its own in autocommit mode, waits for the
write lock within the store's patience like any writer, and is followed by
a ``wal_checkpoint(TRUNCATE)`` so the space really leaves the disk.
(``hermes-store optimize`` also merges the FTS segments first; see
:mod:`hermes_store.tools.optimize`.)
"""

from __future__ import annotations

import time
from pathlib import Path

from hermes_store.backends.sqlite.library import driver as sqlite3
from hermes_store.errors import StoreLockedError


def vacuum(path: Path, patience_s: float) -> None:
    """Rewrite the file without its free pages; StoreLockedError if the lock never came.

    Any other failure (a full disk: VACUUM needs room for a copy; a damaged
    page) is the driver's, for the store to name; the file is left as it was
    (VACUUM is atomic).
    """
    started = time.monotonic()
    connection = sqlite3.connect(str(path), timeout=patience_s, isolation_level=None)
    try:
        connection.execute("VACUUM")
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    except sqlite3.OperationalError as error:
        if "locked" in str(error) or "busy" in str(error):
            raise StoreLockedError(str(path), time.monotonic() - started, 1) from error
        raise  # named by the store (damage, a full disk ...): Store.name_failure
    finally:
        connection.close()
