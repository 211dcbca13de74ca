"""What ``PRAGMA integrity_check`` says about pages, apart from what it says about FTS5 indexes.

Since SQLite 3.44 the pragma also runs every FTS5 table's own check, and an
index that disagrees with its content table (stale, not damaged: a rebuild
mends it) then shows up among the findings about broken pages. The store
judges the two apart: a stale index is the search check's business, damaged
pages are the file's.
"""

from __future__ import annotations

from collections.abc import Iterable

_BANNER = "*** in database"


def _about_fts5(line: str) -> bool:
    return line.startswith("fts5:") or "FTS5 table" in line


def page_findings(rows: Iterable[object]) -> list[str]:
    """The pragma's findings about the file, one a line; empty when the pages are sound.

    SQLite may put several findings in one row, under a banner line naming the
    schema; both are split off, and so are the findings of FTS5 index checks.
    """
    lines = (line.strip() for row in rows for line in str(row).splitlines())
    return [
        line
        for line in lines
        if line and line != "ok" and not line.startswith(_BANNER) and not _about_fts5(line)
    ]
