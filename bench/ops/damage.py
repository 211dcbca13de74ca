"""Damage real SQLite files the way disks and bad copies do: whole pages overwritten.

Shared by the corruption tests and ``python -m bench.ops.recover``, so the drills
whose figures a report quotes are the ones the suite runs. Page 1 (the file
header and the root of the schema) is never touched: a drill is about data
pages, and a file without its header is a different failure.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from hermes_store.backends.sqlite.library import driver as sqlite3

from ..paths import WORK_ROOT

_DBSTAT_CHILD = """
import json, sqlite3, sys
path, sql, params = json.loads(sys.stdin.read())
connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
print(json.dumps(connection.execute(sql, params).fetchall()))
"""


def dbstat_rows(path: Path, sql: str, params: Iterable[object] = ()) -> list[tuple[object, ...]]:
    """Rows of a query on ``dbstat`` (and the file's own tables), run in a child process.

    The bundled SQLite the store links is built without the ``dbstat`` table;
    Python's own usually has it. The child keeps the two libraries out of one
    process: two copies of SQLite in one process break each other's file locks.
    """
    done = subprocess.run(
        [sys.executable, "-I", "-c", _DBSTAT_CHILD],
        input=json.dumps([str(path), sql, list(params)]),
        capture_output=True,
        text=True,
        check=True,
    )
    return [tuple(row) for row in json.loads(done.stdout)]


def page_size(path: Path) -> int:
    with path.open("rb") as handle:
        header = handle.read(100)
    size = int.from_bytes(header[16:18], "big")
    return 65536 if size == 1 else size


def pages_of(path: Path, names: Iterable[str], pagetype: str | None = None) -> list[int]:
    """The pages of the named tables and indexes, read with ``dbstat`` from an intact file.

    ``pagetype`` ("leaf", "internal", "overflow") keeps only pages of that kind.
    """
    wanted = sorted(set(names))
    marks = ", ".join("?" for _ in wanted)
    kind = "" if pagetype is None else " AND pagetype = ?"
    rows = dbstat_rows(
        path,
        f"SELECT pageno FROM dbstat WHERE name IN ({marks}){kind} ORDER BY pageno",
        [*wanted, *([pagetype] if pagetype else [])],
    )
    return [int(str(page)) for (page,) in rows if page != 1]


def page_count(path: Path) -> int:
    return os.path.getsize(path) // page_size(path)


@dataclass(frozen=True)
class Drill:
    """Which pages of an intact file to overwrite: ``count`` of them, chosen with ``seed``."""

    name: str
    count: int
    seed: int
    among: tuple[str, ...] | None = None
    """Only pages of these tables and indexes (None: any page but the first)."""
    pagetype: str | None = None

    def pages(self, path: Path) -> list[int]:
        if self.among is None:
            pool = list(range(2, page_count(path) + 1))
        else:
            pool = pages_of(path, self.among, self.pagetype)
        return sorted(random.Random(self.seed).sample(pool, min(self.count, len(pool))))


DRILLS = (
    Drill("20 random pages anywhere", 20, 11),
    Drill("8 leaf pages of messages", 8, 12, ("messages",), "leaf"),
    Drill("2 interior pages of messages", 2, 13, ("messages",), "internal"),
    Drill("1 leaf page of sessions", 1, 14, ("sessions",), "leaf"),
)


def overwrite_pages(path: Path, pages: Iterable[int], seed: int = 0) -> list[int]:
    """Overwrite each page with random bytes, in place; returns the pages, sorted."""
    rng = random.Random(seed)
    size = page_size(path)
    done = sorted(set(pages))
    if 1 in done:
        raise ValueError("page 1 holds the header: drills leave it alone")
    with path.open("r+b") as handle:
        for page in done:
            handle.seek((page - 1) * size)
            handle.write(rng.randbytes(size))
        handle.flush()
        os.fsync(handle.fileno())
    return done


# ----------------------------------------------------------------------
# the anchor: the sqlite3 shell's .recover
# ----------------------------------------------------------------------
SHELL_ENV = "HERMES_SQLITE3_SHELL"
"""A sqlite3 shell whose ``.recover`` works (built with ``sqlite_dbpage``), if not on PATH."""


def recover_shell() -> tuple[str | None, str]:
    """A sqlite3 shell whose ``.recover`` works, or None and why there is none.

    Debian's shell (3.40.1) is built without ``sqlite_dbpage``, and its
    ``.recover`` fails with "SQL logic error" on every file, so a shell is
    tried on a one-row file before it is trusted.
    """
    import shutil
    import subprocess
    import tempfile

    built = WORK_ROOT / "sqlite3-recover"  # recover_shell.sh
    shell = os.environ.get(SHELL_ENV) or (str(built) if built.exists() else None)
    shell = shell or shutil.which("sqlite3")
    if shell is None:
        return (
            None,
            f"no sqlite3 shell on PATH (or ${SHELL_ENV}; bench/ops/recover_shell.sh builds one)",
        )
    with tempfile.TemporaryDirectory() as scratch:
        probe = Path(scratch) / "probe.db"
        connection = sqlite3.connect(probe)
        connection.execute("CREATE TABLE t(x)")
        connection.execute("INSERT INTO t VALUES ('probe')")
        connection.commit()
        connection.close()
        done = subprocess.run(
            [shell, str(probe), ".recover"], capture_output=True, text=True, timeout=60
        )
    if done.returncode != 0 or "probe" not in done.stdout:
        why = (done.stderr.strip() or done.stdout.strip()).splitlines()[-1:]
        return None, (
            f"{shell} cannot .recover ({' '.join(why)}; built without sqlite_dbpage? "
            "bench/ops/recover_shell.sh builds one that can)"
        )
    return shell, ""


def shell_recover(shell: str, damaged: Path, work: Path) -> dict[str, object]:
    """Run ``.recover`` on a copy of ``damaged``; the message and session ids it got back.

    Rows it could not place in their table land in ``lost_and_found``; those
    shaped like a message (13 fields, text session id and role, a number
    timestamp) are counted apart, since a person would have to put them back.
    """
    import subprocess
    import time

    copy = work / f"{damaged.stem}-for-shell.db"
    copy.write_bytes(damaged.read_bytes())
    rebuilt = work / f"{damaged.stem}-shell-recovered.db"
    rebuilt.unlink(missing_ok=True)
    started = time.monotonic()
    dump = subprocess.run(
        [shell, str(copy), ".recover"], capture_output=True, timeout=600, check=True
    ).stdout
    subprocess.run([shell, str(rebuilt)], input=dump, capture_output=True, timeout=600, check=True)
    seconds = time.monotonic() - started
    connection = sqlite3.connect(rebuilt)
    try:
        messages = {row[0] for row in connection.execute("SELECT id FROM messages")}
        sessions = {row[0] for row in connection.execute("SELECT id FROM sessions")}
        lost: set[int] = set()
        # The shell gives lost_and_found one column per field of its widest row,
        # so a run that lost only short rows (index entries) has no c7 at all.
        lost_columns = {row[1] for row in connection.execute("PRAGMA table_info(lost_and_found)")}
        if {"c1", "c2", "c7"} <= lost_columns:
            lost = {
                row[0]
                for row in connection.execute(
                    "SELECT id FROM lost_and_found WHERE nfield = 13 AND typeof(c1) = 'text' "
                    "AND typeof(c2) = 'text' AND typeof(c7) IN ('real', 'integer')"
                )
            }
    finally:
        connection.close()
    copy.unlink()
    return {
        "messages": messages,
        "lost_and_found_messages": lost - messages,
        "sessions": sessions,
        "seconds": seconds,
    }
