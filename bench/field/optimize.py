"""The optimize row: how much space a pruned state.db gives back, and what it costs.

A prune deletes rows but SQLite keeps the pages (on the freelist) and FTS5
keeps the deleted entries as tombstones in its segments until they merge,
so the file never shrinks -- a top complaint upstream. This measures, on the
pruned copy, the steps a future ``hermes-store optimize`` would take, one by
one in plain ``sqlite3`` (the store has no such command yet, so there is no
store side): FTS5 ``optimize`` on each index (merges the segments, dropping
the tombstones), ``ANALYZE``, then ``VACUUM``. After each: the seconds it
took, the file's size and its free pages, all with the WAL checkpointed
into the file first so the sizes are comparable.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from hermes_store.backends.sqlite.library import driver as sqlite3

from .corpus import fts_tables


def _state(connection: sqlite3.Connection, path: Path) -> dict[str, int]:
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    page = connection.execute("PRAGMA page_size").fetchone()[0]
    return {
        "file_bytes": path.stat().st_size,
        "free_bytes": connection.execute("PRAGMA freelist_count").fetchone()[0] * page,
    }


def optimize_steps(path: Path) -> list[dict[str, Any]]:
    """Each step's name, seconds, file size and free bytes after it (the first: before any)."""
    connection = sqlite3.connect(str(path), isolation_level=None)
    try:
        connection.execute("PRAGMA journal_mode=WAL")
        steps: list[dict[str, Any]] = [{"step": "after prune", "seconds": 0.0}]
        steps[0].update(_state(connection, path))
        work = [
            (f"FTS optimize {name}", f'INSERT INTO "{name}"("{name}") VALUES (\'optimize\')')
            for name in fts_tables(connection)
        ]
        work += [("ANALYZE", "ANALYZE"), ("VACUUM", "VACUUM")]
        for name, sql in work:
            started = time.perf_counter()
            connection.execute(sql)
            step: dict[str, Any] = {"step": name, "seconds": time.perf_counter() - started}
            step.update(_state(connection, path))
            steps.append(step)
    finally:
        connection.close()
    return steps
