"""The benchmark's floor of shared commits writes what the store would: every append, counted.

``bench.micro.plain_group`` is the yardstick the 8-appender rows are judged
against; a floor that dropped or merged appends would look faster than it is.
"""

from __future__ import annotations

import threading
from pathlib import Path

from bench.micro.plain_group import GroupedPlainAppender
from hermes_store import SessionDB
from hermes_store.backends.sqlite.library import driver as sqlite3

WRITERS = 8
APPENDS = 60


def test_grouped_floor_keeps_every_append_and_its_count(tmp_path: Path) -> None:
    path = tmp_path / "floor.db"
    with SessionDB(path) as db:
        for n in range(WRITERS):
            db.create_session(f"w{n}", "bench")
    floor = GroupedPlainAppender(path)
    ids: dict[int, list[int]] = {}
    go = threading.Barrier(WRITERS)

    def write(n: int) -> None:
        go.wait()
        ids[n] = [floor.append_message(f"w{n}", "user", f"message {k}") for k in range(APPENDS)]

    threads = [threading.Thread(target=write, args=(n,)) for n in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    floor.close()

    every = sorted(i for mine in ids.values() for i in mine)
    assert len(set(every)) == WRITERS * APPENDS
    assert floor.transactions < WRITERS * APPENDS  # some appends did share a commit
    with sqlite3.connect(path) as conn:
        for n in range(WRITERS):
            rows = conn.execute(
                "SELECT id, content FROM messages WHERE session_id = ? ORDER BY id", (f"w{n}",)
            ).fetchall()
            assert [row[0] for row in rows] == ids[n]  # each id is the row its caller wrote
            assert [row[1] for row in rows] == [f"message {k}" for k in range(APPENDS)]
            (count,) = conn.execute(
                "SELECT message_count FROM sessions WHERE id = ?", (f"w{n}",)
            ).fetchone()
            assert count == APPENDS
