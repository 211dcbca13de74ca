"""Run as a separate process: hold the write lock of a SQLite file for a while.

``python tests/support/lock_holder.py PATH SECONDS`` opens PATH with plain sqlite3,
takes the write lock with ``BEGIN IMMEDIATE``, prints ``locked`` and keeps the
transaction open for SECONDS before rolling back -- what a sibling running
VACUUM or a long checkpoint looks like to the store. With ``release`` for
SECONDS it keeps the lock until it reads a line or the end of its
standard input: a test that must
see something happen while the lock is held releases it itself, where a
fixed hold could run out first on a loaded machine.
"""

from __future__ import annotations

import sys
import time

from hermes_store.backends.sqlite.library import driver as sqlite3


def main() -> None:
    path, hold = sys.argv[1], sys.argv[2]
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("BEGIN IMMEDIATE")
    print("locked", flush=True)
    if hold == "release":
        sys.stdin.readline()
    else:
        time.sleep(float(hold))
    connection.execute("ROLLBACK")
    connection.close()


if __name__ == "__main__":
    main()
