"""A store held open by another process, driven line by line (tests/recovery/test_replaced_file.py).

``python tests/support/store_worker.py DB`` opens ``SessionDB(DB)`` and then, for each
line on stdin -- ``append SESSION TEXT``, ``messages SESSION``, ``branch SESSION
PARENT`` (a new session split off PARENT, with one message) or ``quit`` --
prints one JSON line: ``{"ok": result}`` or ``{"error": class name, "message": ...}``.
"""

from __future__ import annotations

import json
import sys

from hermes_store import SessionDB


def main() -> None:
    db = SessionDB(sys.argv[1])
    print(json.dumps({"ok": "ready"}), flush=True)
    for line in sys.stdin:
        command, _, rest = line.strip().partition(" ")
        if command == "quit":
            break
        try:
            if command == "append":
                session, _, text = rest.partition(" ")
                result: object = db.append_message(session, "user", text)
            elif command == "branch":
                session, _, parent = rest.partition(" ")
                db.create_session(session, "cli", parent_session_id=parent)
                result = db.append_message(session, "user", "written between two batches")
            elif command == "messages":
                result = [m["content"] for m in db.get_messages(rest)]
            else:
                raise ValueError(f"unknown command {command!r}")
        except Exception as error:  # reported to the test, which decides
            print(json.dumps({"error": type(error).__name__, "message": str(error)}), flush=True)
        else:
            print(json.dumps({"ok": result}), flush=True)
    db.close()


if __name__ == "__main__":
    main()
