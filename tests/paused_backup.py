"""A real backup process that stops while it holds its partial file (tests/test_backup_hostile.py).

``python tests/paused_backup.py DB FOLDER`` runs ``backup(DB, FOLDER, keep=1)``;
when the copy is written and about to be verified (SQLite opens the partial
read-only) it prints the partial's path and waits for a line on stdin, then
finishes and prints the backup's path. The stdlib ``sqlite3`` is chosen
because it announces each connect as an audit event (``pysqlite3`` does not):
the pause is a hook on that event, nothing of the backup is replaced.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

os.environ["HERMES_STORE_SQLITE"] = "system"  # before hermes_store picks its library

FOLDER = Path(sys.argv[2])
paused: list[str] = []


def _pause_at_the_partial(event: str, args: tuple[object, ...]) -> None:
    if event != "sqlite3.connect" or paused:
        return
    opened = str(args[0])
    found = re.search(r"[^/]*\.partial", opened)
    if found and "mode=ro" in opened:
        paused.append(found.group(0))
        print(FOLDER / found.group(0), flush=True)
        sys.stdin.readline()


def main() -> None:
    sys.addaudithook(_pause_at_the_partial)
    from hermes_store.tools.backup import backup

    report = backup(sys.argv[1], FOLDER, keep=1)
    assert paused, "the backup never opened its partial read-only: the pause did not happen"
    print(report.path, flush=True)


if __name__ == "__main__":
    main()
