"""A process whose writers share commits, for the crash and contention tests.

``python tests/support/shared_worker.py DB PREFIX MODE WRITERS TURNS`` opens DB with
shared commits and runs WRITERS concurrent writers -- threads of a
``SessionDB`` (MODE ``threads``) or tasks of an ``AsyncSessionDB`` (MODE
``tasks``) -- each appending TURNS turns of three messages to its own session
``PREFIX-<n>`` (TURNS 0: forever, until SIGKILL ends the process). After each
acknowledged turn it prints ``<session> <id> <id> <id>``; at the end, ``done``.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from typing import Any

from hermes_store import SessionDB
from hermes_store.aio import AsyncSessionDB


def _turn(n: int) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": f"turn {n} question"},
        {"role": "assistant", "content": f"turn {n} answer", "tool_calls": [{"id": f"c{n}"}]},
        {"role": "tool", "content": f"turn {n} result " + "x" * 500},
    ]


def _say(lock: threading.Lock, line: str) -> None:
    with lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def run_threads(db_path: str, prefix: str, writers: int, turns: int) -> None:
    db = SessionDB(db_path, shared_commits=True)
    lock = threading.Lock()
    for n in range(writers):
        db.create_session(f"{prefix}-{n}", "cli")
    _say(lock, "ready")

    def write(n: int) -> None:
        session = f"{prefix}-{n}"
        turn = 0
        while turns == 0 or turn < turns:
            ids = db.append_messages(session, _turn(turn))
            _say(lock, " ".join([session, *map(str, ids)]))
            turn += 1

    threads = [threading.Thread(target=write, args=(n,)) for n in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    db.close()


async def run_tasks(db_path: str, prefix: str, writers: int, turns: int) -> None:
    db = await AsyncSessionDB.open(db_path)
    lock = threading.Lock()
    for n in range(writers):
        await db.create_session(f"{prefix}-{n}", "cli")
    _say(lock, "ready")

    async def write(n: int) -> None:
        session = f"{prefix}-{n}"
        turn = 0
        while turns == 0 or turn < turns:
            ids = await db.append_messages(session, _turn(turn))
            _say(lock, " ".join([session, *map(str, ids)]))
            turn += 1

    await asyncio.gather(*(write(n) for n in range(writers)))
    await db.close()


def main() -> None:
    db_path, prefix, mode, writers, turns = sys.argv[1:6]
    if mode == "threads":
        run_threads(db_path, prefix, int(writers), int(turns))
    else:
        asyncio.run(run_tasks(db_path, prefix, int(writers), int(turns)))
    print("done", flush=True)


if __name__ == "__main__":
    main()
