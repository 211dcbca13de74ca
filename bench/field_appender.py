"""The other writer of the prune-wait row: an agent appending while a prune runs.

``python -m bench.field_appender DB INTERVAL_MS``: opens the store with a
patience long enough to outlast any prune (so a wait is measured, not an
error), creates its own session, prints ``ready``, and on a line on stdin
starts appending one message every INTERVAL_MS; on a second line it stops
and prints one JSON line with every append's start (system-wide monotonic
clock, comparable with the parent's) and duration. The longest append that
overlapped the prune is how long an agent's turn stood still.
"""

from __future__ import annotations

import json
import sys
import threading
import time


def main(argv: list[str]) -> int:
    db_path, interval_ms = argv[0], float(argv[1])
    from hermes_store import ContentionPolicy, SessionDB

    db = SessionDB(db_path, policy=ContentionPolicy(patience_s=3_600.0))
    session_id = "bench_appender"
    db.create_session(session_id, "cli", model="bench")
    db.append_message(session_id, "user", content="warm up")
    print("ready", flush=True)
    sys.stdin.readline()
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.readline(), stop.set()), daemon=True).start()
    samples: list[tuple[float, float]] = []
    errors: list[str] = []
    number = 0
    while not stop.is_set():
        number += 1
        started = time.monotonic()
        try:
            db.append_message(session_id, "assistant", content=f"still here, message {number}")
        except Exception as error:  # reported, never fatal: the row says what happened
            errors.append(f"{type(error).__name__}: {error}")
        samples.append((started, time.monotonic() - started))
        time.sleep(interval_ms / 1000)
    db.close()
    print(json.dumps({"samples": samples, "errors": errors}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
