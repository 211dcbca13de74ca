"""``backup``: a verified copy of a live state.db, kept in a bounded rotation.

A ``cp`` of a database in WAL mode copies the main file and misses (or tears)
what is still in the ``-wal``: people in the field had three backups, all
corrupt. A backup here is SQLite's online backup API run inside one read
transaction of the source, so it is exactly the database as of one commit
while other processes go on writing (WAL readers never block writers), and
the counts it is verified against are read in that same transaction.

Measured against ``VACUUM INTO`` on the 100,000-message benchmark file
(``python -m bench.backup``): both take the same time within the noise, the
backup API's copy is about 3% larger (it keeps free pages), but ``VACUUM
INTO`` cannot run inside a transaction, so its copy could not be checked
against counts of the same snapshot. Hence the backup API.

Before anything is written the free space is checked (the whole database,
WAL included, must fit). The copy is made under a temporary name, created
0600 before SQLite opens it, switched to rollback-journal mode (a single
self-contained file, no ``-wal`` to forget), checked (``PRAGMA
integrity_check`` and the snapshot's counts), flushed, and only then renamed
into place; then the oldest backups beyond ``keep`` are deleted -- never
before the new one is known good, and never a file this module did not name.
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
from hermes_store.backends.sqlite.integrity import page_findings
from hermes_store.backends.sqlite.library import driver as sqlite3
from hermes_store.backends.sqlite.private_files import PRIVATE_MODE
from hermes_store.errors import InvalidInputError, StoreError
from hermes_store.tools.disk import require_free_space, sync
from hermes_store.uow.corruption import corrupt_error

DEFAULT_KEEP = 3
BACKUP_DIR = "backups"
_STAMP = "%Y%m%dT%H%M%S"
_NAME = re.compile(r"^(?P<stem>.+)-(?P<stamp>\d{8}T\d{6}\.\d{6})Z\.db$")
_PARTIAL = re.compile(r"^\.(?P<stem>.+)-\d{8}T\d{6}\.\d{6}Z\.(?P<pid>\d+)\.partial$")


COUNT_ROWS = "SELECT (SELECT COUNT(*) FROM sessions), (SELECT COUNT(*) FROM messages)"
"""What a copy is verified by, besides ``integrity_check``."""


class BackupError(StoreError):
    """The backup could not be made or did not verify; existing backups are untouched."""


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
    ``<stem>-<UTC time>Z.db``; only files so named count for the rotation.
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
    directory = Path(to).expanduser() if to is not None else hermes_home() / BACKUP_DIR
    if directory.exists() and not directory.is_dir():
        raise BackupError(f"{directory} is not a directory (--to names where backups go)")
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    _clear_stale_partials(directory)
    started = time.monotonic()
    now = datetime.now(UTC)
    stamp = now.strftime(_STAMP) + f".{now.microsecond:06d}"
    final = directory / f"{path.stem}-{stamp}Z.db"
    partial = directory / f".{path.stem}-{stamp}Z.{os.getpid()}.partial"
    try:
        sessions, messages = _copy(path, partial, directory)
        _verify(partial, path, sessions, messages)
        os.rename(partial, final)
        sync(directory)
    finally:
        for suffix in ("", "-journal", "-wal", "-shm"):
            Path(f"{partial}{suffix}").unlink(missing_ok=True)
    removed = _rotate(directory, path.stem, keep)
    return BackupReport(
        path=final,
        bytes=final.stat().st_size,
        seconds=time.monotonic() - started,
        sessions=sessions,
        messages=messages,
        removed=removed,
    )


def _copy(source: Path, partial: Path, directory: Path) -> tuple[int, int]:
    """The snapshot into ``partial``; the session and message counts of that snapshot."""
    reader = sqlite3.connect(source, isolation_level=None)
    try:
        reader.execute("BEGIN")
        page_size, pages = (
            reader.execute("PRAGMA page_size").fetchone()[0],
            reader.execute("PRAGMA page_count").fetchone()[0],
        )
        require_free_space(directory, page_size * pages, "the backup", BackupError)
        sessions, messages = reader.execute(COUNT_ROWS).fetchone()
        descriptor = os.open(partial, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW, 0o600)
        os.close(descriptor)
        os.chmod(partial, PRIVATE_MODE)  # whatever the umask did
        writer = sqlite3.connect(partial, isolation_level=None)
        try:
            writer.execute("PRAGMA journal_mode = OFF")  # a failed copy is deleted anyway
            writer.execute("PRAGMA synchronous = OFF")  # flushed once, below
            reader.backup(writer)
            writer.execute("PRAGMA journal_mode = DELETE")  # one self-contained file
        finally:
            writer.close()
        reader.execute("COMMIT")
    except sqlite3.Error as error:
        raise _failure(error, source, f"backup of {source} failed") from error
    finally:
        reader.close()
    sync(partial)
    return int(sessions), int(messages)


def _damaged_source(source: Path, detail: str) -> BackupError:
    """The copy is page for page the source's: damage found in it is the source's."""
    return BackupError(
        f"{source} is damaged ({detail}): a backup of it would be damaged too, so none was "
        f"kept; salvage it with 'hermes-store recover --from {source} --to NEW.db'"
    )


def _failure(error: sqlite3.Error, source: Path, what: str) -> BackupError:
    """Damage is the source's (the copy is its pages); anything else is said as it is."""
    corrupt = corrupt_error(error, str(source))
    if corrupt is not None:
        return _damaged_source(source, corrupt.detail)
    return BackupError(f"{what} ({error})")


def _verify(path: Path, source: Path, sessions: int, messages: int) -> None:
    checker = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        problems = page_findings(row[0] for row in checker.execute("PRAGMA integrity_check"))
        if problems:
            raise _damaged_source(source, "; ".join(" ".join(p.split()) for p in problems[:3]))
        counted = checker.execute(COUNT_ROWS).fetchone()
        mode = checker.execute("PRAGMA journal_mode").fetchone()[0]
    except sqlite3.Error as error:
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
    """The backups of ``stem`` in ``directory``, oldest first (their names sort by time)."""
    found = []
    for candidate in directory.iterdir():
        match = _NAME.match(candidate.name)
        if match and match["stem"] == stem and candidate.is_file():
            found.append(candidate)
    return sorted(found, key=lambda p: p.name)


def _rotate(directory: Path, stem: str, keep: int) -> list[Path]:
    existing = backups_in(directory, stem)
    doomed = existing[: max(0, len(existing) - keep)]
    for old in doomed:
        old.unlink(missing_ok=True)
    return doomed


def _clear_stale_partials(directory: Path) -> None:
    """Remove what a killed backup left behind (its process is gone)."""
    for candidate in directory.iterdir():
        match = _PARTIAL.match(candidate.name)
        if match and not _alive(int(match["pid"])):
            candidate.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
