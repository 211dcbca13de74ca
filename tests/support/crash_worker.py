"""A writer that is killed mid-burst by tests/contention/test_crash_safety.py.

``python tests/support/crash_worker.py DB SESSION DURABILITY`` appends 3-message
turns to SESSION forever, printing ``<turn> <id> <id> <id>`` after each
commit, until SIGKILL ends it at a random point.
"""

from __future__ import annotations

import sys

from hermes_store import SessionDB


def main() -> None:
    db_path, session_id, durability = sys.argv[1:4]
    db = SessionDB(db_path, durability=durability)
    print("ready", flush=True)
    turn = 0
    while True:
        ids = db.append_messages(
            session_id,
            [
                {"role": "user", "content": f"turn {turn} question crashword"},
                {
                    "role": "assistant",
                    "content": f"turn {turn} answer",
                    "tool_calls": [{"id": f"c{turn}a"}, {"id": f"c{turn}b"}],
                },
                {"role": "tool", "content": f"turn {turn} result " + "x" * 3000},
            ],
        )
        print(turn, *ids, flush=True)
        turn += 1


if __name__ == "__main__":
    main()
