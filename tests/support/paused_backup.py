"""A real backup process that stops holding its partial file (recovery/test_backup_hostile.py).

``python tests/support/paused_backup.py DB FOLDER [verify|link]`` runs ``backup(DB,
FOLDER, keep=1)``; when the copy is written and about to be verified (SQLite
opens the partial read-only; ``verify``, the default) or about to be linked
into place (``link``: the folder's lock is held then) it prints the partial's
path and waits for a line on stdin, then finishes and prints the backup's path.
The stdlib ``sqlite3`` is chosen because it announces each connect as an audit
event (``pysqlite3`` does not): the pause is a hook on that event (or on
``os.link``'s), nothing of the backup is replaced.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

os.environ["HERMES_STORE_SQLITE"] = "system"  # before hermes_store picks its library

FOLDER = Path(sys.argv[2])
AT = sys.argv[3] if len(sys.argv) > 3 else "verify"
paused: list[str] = []


def _pause_at_the_partial(event: str, args: tuple[object, ...]) -> None:
    if paused or event not in ("sqlite3.connect", "os.link"):
        return
    opened = str(args[0])
    found = re.search(r"[^/]*\.partial", opened)
    if AT == "verify":
        wanted = event == "sqlite3.connect" and "mode=ro" in opened
    else:
        wanted = event == "os.link"
    if found and wanted:
        paused.append(found.group(0))
        print(FOLDER / found.group(0), flush=True)
        sys.stdin.readline()


def main() -> None:
    sys.addaudithook(_pause_at_the_partial)
    from hermes_store.tools.backup import backup

    report = backup(sys.argv[1], FOLDER, keep=1)
    assert paused, f"the backup never reached {AT}: the pause did not happen"
    print(report.path, flush=True)


if __name__ == "__main__":
    main()
