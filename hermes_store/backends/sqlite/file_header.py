"""The first 100 bytes of every SQLite database file: what the store reads of them itself.

Opening (a file too short or not a database), backup rotation (a finished
backup of ours) and recovery (the page size of a damaged file) each look at
the header without SQLite; they share its layout here.
"""

from __future__ import annotations

MAGIC = b"SQLite format 3\x00"
"""The 16 bytes every database file starts with."""
HEADER_SIZE = 100
"""SQLite's database header: every database file starts with these 100 bytes."""


def page_size(header: bytes) -> int:
    """The page size the header says (offset 16; the value 1 stands for 65,536)."""
    size = int.from_bytes(header[16:18], "big")
    return 65536 if size == 1 else size


def is_database_header(header: bytes) -> bool:
    """True when ``header`` is a whole header that starts as a database's does."""
    return len(header) >= HEADER_SIZE and header.startswith(MAGIC)
