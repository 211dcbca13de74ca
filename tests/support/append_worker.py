"""One appending process for the backup and replaced-file tests.

``python tests/support/append_worker.py DB NAME STOP_FILE`` appends ``NAME-0``,
``NAME-1``, ... to session NAME, one commit each, until STOP_FILE exists;
then prints how many it appended.
"""

from __future__ import annotations

import sys
from pathlib import Path

from hermes_store import SessionDB


def main() -> None:
    path, name, stop = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    db = SessionDB(path)
    if db.get_session(name) is None:
        db.create_session(name, "cli")
    count = 0
    while not stop.exists():
        db.append_message(name, "user", f"{name}-{count}")
        count += 1
    db.close()
    print(count)


if __name__ == "__main__":
    main()
