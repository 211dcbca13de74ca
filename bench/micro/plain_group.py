"""The floor of shared commits: the fewest Python steps that group 8 threads' appends.

``PlainSessionDB`` (the old class) makes every append its own transaction,
so 8 threads pay 8 flushes. The store's shared commits pay one flush for
the appends that arrive together, and then run into what one process can do
under one GIL: wake every caller, run its Python, take its next call. To
tell that limit from our own layers, this is the same shape with nothing
around it, on plain ``sqlite3``: the first caller with nobody leading leads,
begins ``BEGIN IMMEDIATE`` (the others queue meanwhile), takes every queued
append, writes them with the store's SQL (one multi-row INSERT, one counter
UPDATE per session), commits, wakes each caller, and hands the lead to the
oldest call queued since. No savepoints, patience, retries, checks or
error paths: a benchmark's floor, not a store (an error would leave its
callers waiting).
"""

from __future__ import annotations

import _thread
from pathlib import Path
from typing import Any

from bench.micro.plain import _INSERT_HEAD, _ONE_ROW, _bump_counters, _message_values
from hermes_store.backends.sqlite.library import driver as sqlite3


class _Slot:
    """One append: its row, the lock its thread sleeps on, and its id once committed."""

    __slots__ = ("done", "id", "values", "woken")

    def __init__(self, values: tuple[Any, ...]) -> None:
        self.values = values
        self.woken = _thread.allocate_lock()
        self.woken.acquire()
        self.id = 0
        self.done = False


class GroupedPlainAppender:
    """``append_message`` for many threads on one connection, their commits shared."""

    def __init__(self, db_path: str | Path) -> None:
        self._conn = sqlite3.connect(
            str(db_path), check_same_thread=False, timeout=1.0, isolation_level=None
        )
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA foreign_keys=ON")
        self._mutex = _thread.allocate_lock()
        self._queued: list[_Slot] = []
        self._leading = False
        self.transactions = 0

    def append_message(self, session_id: str, role: str, content: str) -> int:
        slot = _Slot(_message_values(session_id, role, content))
        with self._mutex:
            self._queued.append(slot)
            lead = not self._leading
            self._leading = True
        if not lead:
            slot.woken.acquire()  # woken with its id, or to lead
            if slot.done:
                return slot.id
        self._lead()
        return slot.id

    def _lead(self) -> None:
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        with self._mutex:
            group, self._queued = self._queued, []
        rows = [slot.values for slot in group]
        placeholders = ", ".join([_ONE_ROW] * len(rows))
        cursor = conn.execute(f"{_INSERT_HEAD} VALUES {placeholders}", [v for r in rows for v in r])
        first = int(cursor.lastrowid) - len(rows) + 1  # type: ignore[arg-type]
        counts: dict[str, int] = {}
        for row in rows:
            counts[row[0]] = counts.get(row[0], 0) + 1
        for session_id, added in counts.items():
            _bump_counters(conn, session_id, added, 0)
        conn.execute("COMMIT")
        self.transactions += 1
        with self._mutex:
            for offset, slot in enumerate(group):
                slot.id, slot.done = first + offset, True
            successor = self._queued[0] if self._queued else None
            self._leading = successor is not None
        for slot in group:
            slot.woken.release()
        if successor is not None:
            successor.woken.release()  # not done: it leads the next group

    def close(self) -> None:
        self._conn.close()
