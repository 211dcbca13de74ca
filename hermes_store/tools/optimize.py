"""Give a state.db's free space back: FTS segment merges, then VACUUM (``hermes-store optimize``).

Deleting rows never shrinks a SQLite file: the pages go on its freelist, and
FTS5 keeps what was deleted as tombstones in its segments until they merge.
A file that was pruned from 3.3 GB to a fifth of its rows is still 3.3 GB --
"a state.db that only grows" was a top complaint upstream. This runs, on a
SQLite file:

1. FTS5 ``'optimize'`` on every FTS index of the file's layout that this
   process can load (ours and the agent's; a ``messages_fts_cjk`` whose
   tokenizer is missing here is skipped and said so): the segments are merged
   into one, the tombstones dropped. Each index is its own write transaction.
2. ``VACUUM`` (unless ``vacuum=False``): the file is rewritten without its free
   pages, then the WAL is checkpointed and truncated so the space really goes.

No ``ANALYZE``: statistics would change the query plans of every program that
opens the file (the agent's included), and the store's statements are written
to plan well without them, on files that never had any.

Locks. Both steps write, so they wait for the write lock like any writer
(the store's patience, then :class:`~hermes_store.errors.StoreLockedError`,
nothing done). ``VACUUM`` then holds it for as long as it runs -- a minute or
more on a multi-gigabyte file -- so agents appending meanwhile wait, and
give up after their own patience (30 s by default): run it when the agent is
idle, or use ``--no-vacuum``. Readers in other processes are not blocked
(WAL), but one that keeps an old snapshot open keeps the old pages too: the
final checkpoint then cannot truncate the WAL, and the report says the space
comes back at a later checkpoint. VACUUM also needs free disk space about the
size of the file, for its copy.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from hermes_store.backends.layout import Layout
from hermes_store.backends.sqlite.fts5_commands import optimize_sql
from hermes_store.backends.sqlite.library import driver as sqlite3
from hermes_store.errors import StoreLockedError


@dataclass(frozen=True)
class Step:
    """One step and the file after it."""

    name: str
    seconds: float
    file_bytes: int
    """The main file and its WAL together."""
    free_bytes: int
    """Pages on the freelist (space the file holds but does not use)."""


@dataclass
class OptimizeReport:
    path: str
    before_bytes: int
    after_bytes: int = 0
    steps: list[Step] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def given_back_bytes(self) -> int:
        return self.before_bytes - self.after_bytes

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "given_back_bytes": self.given_back_bytes}


def _size(path: Path) -> int:
    wal = Path(f"{path}-wal")
    return path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)


def _free(connection: sqlite3.Connection) -> int:
    page = int(connection.execute("PRAGMA page_size").fetchone()[0])
    return int(connection.execute("PRAGMA freelist_count").fetchone()[0]) * page


def _checkpoint(connection: sqlite3.Connection) -> bool:
    """Checkpoint and truncate the WAL; False if a reader kept part of it."""
    busy, _log, _done = connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    return not busy


def optimize(
    path: Path, layout: Layout, *, vacuum: bool = True, patience_s: float = 30.0
) -> OptimizeReport:
    """Merge the FTS indexes of ``layout`` and (``vacuum``) rewrite the file; what it gave back."""
    connection = sqlite3.connect(str(path), timeout=patience_s, isolation_level=None)
    try:
        _checkpoint(connection)
        report = OptimizeReport(str(path), before_bytes=_size(path))
        for index in layout.fts_indexes():
            if not index.usable:
                report.notes.append(
                    f"{index.name} skipped: its tokenizer ({index.tokenizer}) is not loaded here"
                )
                continue
            _run(
                connection,
                report,
                path,
                f"FTS optimize {index.name}",
                optimize_sql(index),
                patience_s,
            )
        if vacuum:
            _run(connection, report, path, "VACUUM", "VACUUM", patience_s)
            if not _checkpoint(connection):
                report.notes.append(
                    "another process is reading an older snapshot: the WAL could not be "
                    "truncated; the space comes back at a later checkpoint"
                )
        report.after_bytes = _size(path)
        return report
    finally:
        connection.close()


def _run(
    connection: sqlite3.Connection,
    report: OptimizeReport,
    path: Path,
    name: str,
    sql: str,
    patience_s: float,
) -> None:
    started = time.monotonic()
    try:
        if sql == "VACUUM":
            connection.execute(sql)
        else:
            connection.execute("BEGIN IMMEDIATE")
            try:
                connection.execute(sql)
            except BaseException:
                connection.execute("ROLLBACK")
                raise
            connection.execute("COMMIT")
    except sqlite3.OperationalError as error:
        if "locked" in str(error) or "busy" in str(error):
            raise StoreLockedError(str(path), time.monotonic() - started, 1) from error
        raise
    _checkpoint(connection)
    report.steps.append(Step(name, time.monotonic() - started, _size(path), _free(connection)))
