"""``backup``: a verified copy of a live state.db, kept in a bounded rotation.

A ``cp`` of a database in WAL mode copies the main file and misses (or tears)
what is still in the ``-wal``: people in the field had three backups, all
corrupt. A backup here is SQLite's online backup API run inside one read
transaction of the source, so it is exactly the database as of one commit
while other processes go on writing (WAL readers never block writers), and
the counts it is verified against are read in that same transaction.

Chosen over ``VACUUM INTO`` (``python -m bench.ops.backup``; the numbers are in
the design notes, "Recovery internals"): both take about the same time and
the backup API's copy is a little larger (it keeps free pages), but ``VACUUM
INTO`` cannot run inside a transaction, so its copy could not be checked
against counts of the same snapshot. Hence the backup API.

Before anything is written the backup folder is checked and held open (see
:mod:`~hermes_store.tools.backup_folder`: ours, writable by nobody else,
made 0700 whatever the umask) and the free space is checked (the whole
database, WAL included, must fit). The copy is made in a partial file
created 0600 through the folder's descriptor, switched to rollback-journal
mode (a single self-contained file, no ``-wal`` to forget), flushed through
its own descriptor, checked (``PRAGMA integrity_check`` and the snapshot's
counts), and only then linked into place under a name that must not exist;
then the oldest backups beyond ``keep`` are deleted -- never before the new
one is known good, never the new one, and never a file that is not a
finished backup of this module's (see :mod:`~hermes_store.tools.backup_rotation`).
A partial file names the process writing it; one whose process is gone is
removed by the next run, one whose process lives is left alone.
A damaged source is refused: its copy would fail the same check, and
``recover`` is the way out there.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy.engine import URL

from hermes_store.backends.location import hermes_home, resolve_url, sqlite_file
from hermes_store.backends.sqlite.failures import owner_hint
from hermes_store.backends.sqlite.integrity import page_findings
from hermes_store.backends.sqlite.library import driver as sqlite3
from hermes_store.backends.sqlite.stored_text import undecodable_schema
from hermes_store.errors import InvalidInputError
from hermes_store.tools.backup_folder import (
    BackupError,
    BackupFolder,
    UnsafeBackupFolderError,
    backup_folder,
)
from hermes_store.tools.backup_rotation import finished_backups, rotate
from hermes_store.tools.disk import require_free_space
from hermes_store.uow.corruption import corrupt_error

__all__ = [
    "COUNT_ROWS",
    "DEFAULT_KEEP",
    "BackupError",
    "BackupReport",
    "UnsafeBackupFolderError",
    "backup",
    "backups_in",
]

DEFAULT_KEEP = 3
BACKUP_DIR = "backups"
_STAMP = "%Y%m%dT%H%M%S"
_PARTIAL = re.compile(
    r"^\.(?P<stem>.+)-\d{8}T\d{6}\.\d{6}Z\.(?P<pid>\d+)\.partial(-journal|-wal|-shm)?$"
)
_SIDECARS = ("-journal", "-wal", "-shm")


COUNT_ROWS = "SELECT (SELECT COUNT(*) FROM sessions), (SELECT COUNT(*) FROM messages)"
"""What a copy is verified by, besides ``integrity_check``."""


@dataclass
class BackupReport:
    path: Path
    bytes: int
    seconds: float
    sessions: int
    messages: int
    removed: list[Path] = field(default_factory=list)
    """Older backups deleted by the rotation."""


def backup(
    source: str | os.PathLike[str] | URL | None = None,
    to: str | os.PathLike[str] | None = None,
    *,
    keep: int = DEFAULT_KEEP,
) -> BackupReport:
    """Back up the store at ``source`` into the directory ``to``; keep at most ``keep``.

    ``source`` is resolved like a store's (default ``$HERMES_HOME/state.db``);
    ``to`` defaults to ``$HERMES_HOME/backups``. Backups are named
    ``<stem>-<UTC time>Z.db``; only finished backups so named count for the
    rotation. A folder of another user's, or one others may write, is refused
    with :class:`UnsafeBackupFolderError`.
    """
    if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
        raise InvalidInputError(f"keep must be an integer >= 1, got {keep!r}")
    url = resolve_url(source)
    path = sqlite_file(url)
    if path is None:
        where = url.render_as_string(hide_password=True)
        raise BackupError(
            f"{where} is not a SQLite file: back up a PostgreSQL store with the server's "
            f"tools, e.g. pg_dump --format=custom --file=hermes.dump '{where}'"
        )
    if not path.is_file():
        raise BackupError(f"no database file at {path}")
    if not os.access(path, os.R_OK):  # before the folder is made: a refused backup leaves none
        raise BackupError(f"{path} cannot be read by this user{owner_hint(str(path))}; no backup")
    directory = Path(to).expanduser() if to is not None else hermes_home() / BACKUP_DIR
    started = time.monotonic()
    try:
        with backup_folder(directory) as folder:
            _clear_stale_partials(folder)
            report = _back_up_into(folder, path, keep)
    except OSError as error:  # a folder we may not enter, a name taken ...: said as ours
        raise BackupError(f"backup into {directory} failed: {error}") from error
    report.seconds = time.monotonic() - started
    return report


def _back_up_into(folder: BackupFolder, path: Path, keep: int) -> BackupReport:
    """Copy, flush, verify, link into place, rotate: the steps inside the held folder."""
    now = datetime.now(UTC)
    stamp = now.strftime(_STAMP) + f".{now.microsecond:06d}"
    final = f"{path.stem}-{stamp}Z.db"
    partial = f".{path.stem}-{stamp}Z.{os.getpid()}.partial"
    descriptor = folder.create(partial)
    try:
        sessions, messages = _copy(path, folder, partial, descriptor)
        os.fsync(descriptor)  # the copy is on disk before its name says it is a backup
        _verify(folder.by_name(partial), path, sessions, messages)
        if not folder.holds(partial, descriptor):
            raise BackupError(
                f"{partial} in {folder.path} is no longer the file this backup wrote; "
                "it was not kept"
            )
        with folder.exclusive():
            try:
                folder.publish(partial, final)
            except FileExistsError:
                raise BackupError(
                    f"{folder.path / final} already exists (it is not replaced, whatever it "
                    "is); no backup was kept -- run the backup again"
                ) from None
            folder.sync()
            removed = rotate(folder, path.stem, keep, made=final)
        size = os.fstat(descriptor).st_size
    finally:
        os.close(descriptor)
        for suffix in ("", *_SIDECARS):
            folder.unlink(partial + suffix)
    return BackupReport(
        path=folder.path / final,
        bytes=size,
        seconds=0.0,
        sessions=sessions,
        messages=messages,
        removed=[folder.path / name for name in removed],
    )


def _copy(source: Path, folder: BackupFolder, partial: str, descriptor: int) -> tuple[int, int]:
    """The snapshot into ``partial`` (the file behind ``descriptor``); its session and
    message counts."""
    reader = sqlite3.connect(source, isolation_level=None)
    try:
        reader.execute("BEGIN")
        page_size, pages = (
            reader.execute("PRAGMA page_size").fetchone()[0],
            reader.execute("PRAGMA page_count").fetchone()[0],
        )
        require_free_space(folder.path, page_size * pages, "the backup", BackupError)
        sessions, messages = reader.execute(COUNT_ROWS).fetchone()
        writer = sqlite3.connect(folder.by_name(partial), isolation_level=None)
        try:
            writer.execute("PRAGMA journal_mode = OFF")  # a failed copy is deleted anyway
            writer.execute("PRAGMA synchronous = OFF")  # flushed once, by the caller
            reader.backup(writer)
            writer.execute("PRAGMA journal_mode = DELETE")  # one self-contained file
        finally:
            writer.close()
        reader.execute("COMMIT")
    except (sqlite3.Error, UnicodeDecodeError) as error:
        raise _failure(error, source, f"backup of {source} failed") from error
    finally:
        reader.close()
    if not folder.holds(partial, descriptor):
        raise BackupError(
            f"the backup folder {folder.path} changed while the copy was written; it was not kept"
        )
    return int(sessions), int(messages)


def _damaged_source(source: Path, detail: str) -> BackupError:
    """The copy is page for page the source's: damage found in it is the source's."""
    return BackupError(
        f"{source} is damaged ({detail}): a backup of it would be damaged too, so none was "
        f"kept; salvage it with 'hermes-store recover --from {source} --to NEW.db'"
    )


def _failure(error: sqlite3.Error | UnicodeDecodeError, source: Path, what: str) -> BackupError:
    """Damage is the source's (the copy is its pages); anything else is said as it is.

    A ``UnicodeDecodeError`` from a statement is the driver failing to decode
    SQLite's "malformed schema" message: schema text that is not UTF-8.
    """
    if isinstance(error, UnicodeDecodeError):
        return _damaged_source(source, undecodable_schema(error))
    corrupt = corrupt_error(error, str(source))
    if corrupt is not None:
        return _damaged_source(source, corrupt.detail)
    return BackupError(f"{what} ({error})")


def _verify(path: str, source: Path, sessions: int, messages: int) -> None:
    checker = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        problems = page_findings(row[0] for row in checker.execute("PRAGMA integrity_check"))
        if problems:
            raise _damaged_source(source, "; ".join(" ".join(p.split()) for p in problems[:3]))
        counted = checker.execute(COUNT_ROWS).fetchone()
        mode = checker.execute("PRAGMA journal_mode").fetchone()[0]
    except (sqlite3.Error, UnicodeDecodeError) as error:
        raise _failure(error, source, "the backup does not read back; it was not kept") from error
    finally:
        checker.close()
    if tuple(counted) != (sessions, messages):
        raise BackupError(
            f"the backup holds {counted[0]} sessions and {counted[1]} messages, the source "
            f"had {sessions} and {messages}; it was not kept"
        )
    if str(mode).lower() != "delete":
        raise BackupError(f"the backup is in {mode} mode, not a single file; it was not kept")


def backups_in(directory: Path, stem: str) -> list[Path]:
    """The finished backups of ``stem`` in ``directory``, oldest first (names sort by time)."""
    descriptor = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        found = finished_backups(BackupFolder(directory, descriptor), stem)
    finally:
        os.close(descriptor)
    return [directory / name for name in found]


def _clear_stale_partials(folder: BackupFolder) -> None:
    """Remove what a killed backup left behind (its process is gone); a live one's stays."""
    for name in folder.names():
        match = _PARTIAL.match(name)
        if match and not _alive(int(match["pid"])):
            folder.unlink(name)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
