"""A file too short to be a database is damage, and an empty one may be what is left of one.

SQLite treats a file shorter than its 100-byte header as an empty database
and writes a new store over it: a state.db truncated to one byte (a full
disk, a torn copy, a crash of another program) silently became a fresh,
empty store, and the history it held was never mentioned again. So, before
a store opens a file:

* a non-empty file that cannot be a database -- shorter than a header, or
  not starting with SQLite's magic string (a zeroed file, which SQLite would
  also take for an empty one) -- is :class:`StoreCorruptError`, naming it;
  nothing is written to it;
* an empty (0-byte) file is what ``touch`` leaves, or what is left of a
  store. Where something beside it says a store was there -- backups of it
  in the backup folder, or a non-empty ``-wal`` -- it is refused as damage
  too, naming the evidence: making a new store there would reset the
  ``-wal`` and bury the history under new sessions. Deleting the empty file
  (or restoring a backup over it) is the way on. An empty file with nothing
  beside it becomes a new store, as before.

The checks cost a ``stat`` and a 16-byte read per open.
"""

from __future__ import annotations

from pathlib import Path
from shlex import quote

from hermes_store.backends.sqlite.file_header import HEADER_SIZE, MAGIC
from hermes_store.errors import StoreCorruptError


def refuse_short_file(path: Path) -> None:
    """StoreCorruptError for a file at ``path`` that is not a store and must not become one."""
    try:
        size = path.stat().st_size
        with path.open("rb") as handle:
            start = handle.read(len(MAGIC)) if size else b""
    except OSError:
        return  # missing (a new store), or unreadable: the open says which
    if size == 0:
        evidence, newest = traces_of_a_store(path)
        if evidence:
            restore = ""
            if newest is not None:  # quoted: the line is meant to be pasted into a shell
                command = f"cp {quote(str(newest))} {quote(str(path))}"
                restore = f"restore the newest backup over it ({command}), or "
            raise StoreCorruptError(
                str(path),
                f"0 bytes, no store, yet {evidence}: it looks truncated, not new",
                way_out=f"{restore}to start a new store there anyway, delete the empty file first",
            )
        return
    if size < HEADER_SIZE:
        raise StoreCorruptError(
            str(path),
            f"{size} byte(s), too short to be a database (SQLite's header alone is "
            f"{HEADER_SIZE} bytes): truncated, or not a session store",
        )
    if start != MAGIC:  # SQLite would take a zeroed file for an empty one and write over it
        raise StoreCorruptError(
            str(path),
            f"{size} bytes, not a database: they do not start as SQLite's do (zeroed, "
            "overwritten, or another kind of file)",
        )


def is_empty_file(path: Path) -> bool:
    """True for an existing 0-byte file (``check`` reports it as empty, not as a store)."""
    try:
        return path.is_file() and path.stat().st_size == 0
    except OSError:
        return False


def traces_of_a_store(path: Path) -> tuple[str, Path | None]:
    """What beside an empty ``path`` says a store was there, in words ("" for nothing),
    and the newest backup of it, if any."""
    from hermes_store.backends.location import hermes_home
    from hermes_store.tools.backup import BACKUP_DIR, backups_in

    found = []
    newest: Path | None = None
    wal = Path(f"{path}-wal")
    try:
        wal_size = wal.stat().st_size
    except OSError:
        wal_size = 0
    if wal_size:
        found.append(f"a {wal_size}-byte {wal.name} is beside it")
    for folder in dict.fromkeys((path.parent / BACKUP_DIR, hermes_home() / BACKUP_DIR)):
        try:
            backups = backups_in(folder, path.stem)
        except OSError:
            continue
        if backups:
            found.append(f"{len(backups)} backup(s) of it are in {folder}")
            newest = newest or backups[-1]
    return " and ".join(found), newest
