"""The other writer of the prune-wait row: an agent appending while a prune runs.

``python -m bench.field.appender DB INTERVAL_MS``: opens the store with a
patience long enough to outlast any prune (so a wait is measured, not an
error), creates its own session, prints ``ready``, and on a line on stdin
starts appending one message every INTERVAL_MS; on a second line it stops
and prints one JSON line with every append's start (system-wide monotonic
clock, comparable with the parent's), duration, and three of its parts: the
wait for the write lock (``BEGIN IMMEDIATE``), the PASSIVE checkpoint the
store runs after every 50th commit, and the whole COMMIT (with that
checkpoint). The longest append that overlapped the prune is how long an
agent's turn stood still; its parts say whether the prune's lock held it, or
work the prune left behind (FTS5 merging at the append's own commit, a
checkpoint, a flush queued behind the prune's).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any


def main(argv: list[str]) -> int:
    db_path, interval_ms = argv[0], float(argv[1])
    from hermes_store import ContentionPolicy, SessionDB
    from hermes_store.backends.sqlite.engine import SqliteRules
    from hermes_store.uow.unit import UnitOfWork

    parts = {"lock": 0.0, "checkpoint": 0.0, "commit": 0.0}
    _time_method(SqliteRules, "begin", parts, "lock")
    _time_method(SqliteRules, "after_write_commit", parts, "checkpoint")
    _time_method(UnitOfWork, "commit", parts, "commit")
    db = SessionDB(db_path, policy=ContentionPolicy(patience_s=3_600.0))
    session_id = "bench_appender"
    db.create_session(session_id, "cli", model="bench")
    db.append_message(session_id, "user", content="warm up")
    print("ready", flush=True)
    sys.stdin.readline()
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.readline(), stop.set()), daemon=True).start()
    samples: list[tuple[float, float, float, float, float]] = []
    errors: list[str] = []
    number = 0
    while not stop.is_set():
        number += 1
        parts["lock"] = parts["checkpoint"] = parts["commit"] = 0.0
        started = time.monotonic()
        try:
            db.append_message(session_id, "assistant", content=f"still here, message {number}")
        except Exception as error:  # reported, never fatal: the row says what happened
            errors.append(f"{type(error).__name__}: {error}")
        took = time.monotonic() - started
        samples.append((started, took, parts["lock"], parts["checkpoint"], parts["commit"]))
        time.sleep(interval_ms / 1000)
    db.close()
    print(json.dumps({"samples": samples, "errors": errors}), flush=True)
    return 0


def _time_method(owner: type, name: str, into: dict[str, float], key: str) -> None:
    """Add the time every call of ``owner.name`` takes to ``into[key]`` (this process only)."""
    original = getattr(owner, name)

    def timed(*args: Any, **kwargs: Any) -> Any:
        began = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            into[key] += time.perf_counter() - began

    setattr(owner, name, timed)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
