"""Damage real SQLite files the way disks and bad copies do: whole pages overwritten.

Shared by the corruption tests and ``python -m bench.recover``, so the drills
whose figures a report quotes are the ones the suite runs. Page 1 (the file
header and the root of the schema) is never touched: a drill is about data
pages, and a file without its header is a different failure.
"""

from __future__ import annotations

import os
import random
import sqlite3
from collections.abc import Iterable
from pathlib import Path


def page_size(path: Path) -> int:
    with path.open("rb") as handle:
        header = handle.read(100)
    size = int.from_bytes(header[16:18], "big")
    return 65536 if size == 1 else size


def pages_of(path: Path, names: Iterable[str]) -> list[int]:
    """The pages of the named tables and indexes, read with ``dbstat`` from an intact file."""
    wanted = sorted(set(names))
    marks = ", ".join("?" for _ in wanted)
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = connection.execute(
            f"SELECT pageno FROM dbstat WHERE name IN ({marks}) ORDER BY pageno", wanted
        ).fetchall()
    finally:
        connection.close()
    return [page for (page,) in rows if page != 1]


def page_count(path: Path) -> int:
    return os.path.getsize(path) // page_size(path)


def pick_pages(
    path: Path, count: int, seed: int, *, among: Iterable[str] | None = None
) -> list[int]:
    """``count`` distinct pages chosen with ``seed``: anywhere but page 1, or among tables."""
    pool = pages_of(path, among) if among is not None else list(range(2, page_count(path) + 1))
    return sorted(random.Random(seed).sample(pool, min(count, len(pool))))


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
