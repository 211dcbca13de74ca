"""Is the file at the store's path still the one its connections opened?

A cron job that copies state.db, prunes the copy and ``mv``s it over the live
file, or a restore from a backup, puts a new file (a new inode) at the path
while the store's connections still hold the old one. Writing on would go to
a file nobody can open any more, and worse: the old file's ``-wal`` and
``-shm`` stay at the path, so whoever opens the new file next reads the old
file's recent pages over it (SQLite applies any valid WAL it finds beside a
database). So every connection records, when it is made, which files it
opened -- the database, its ``-wal`` and ``-shm`` (device and inode) -- and
before each unit of work the store compares the path with that record: one
``stat``, small next to an append's flush (``python -m bench.micro.replaced``;
design notes, "Recovery internals").

When the path names another file, the store moves to it (see
:meth:`~hermes_store.uow.connections.ThreadConnections.acquire`): the old file's
``-wal`` and ``-shm`` are unlinked first -- only if they are still the ones
this connection opened, under a lock on the directory, so of several
processes that notice, only the first does it, and never to the new file's --
then the old connections are closed (SQLite neither checkpoints nor deletes
the WAL of a database that was moved) and a new connection opens the file at
the path, which must pass the checks an open makes (a regular file of this
user's or of the old file's owner: see
:func:`~hermes_store.backends.sqlite.private_files.require_fit_replacement`)
and be a store at the head schema. A connection made later by name is held
to the same checks (another user's file renamed over the path is refused,
not written). A path with no file is
refused (:class:`~hermes_store.errors.StoreReplacedError`): nothing is made
where the history was.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows cannot replace an open file anyway
    fcntl = None  # type: ignore[assignment]  # None: this platform has none (checked at use)

SIDECARS = ("-wal", "-shm")


def _identity(path: str) -> tuple[int, int] | None:
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return None
    return info.st_dev, info.st_ino


@dataclass(slots=True)
class OpenedFiles:
    """Which files a connection opened: (device, inode) of the database and its sidecars.

    A brand-new database has no ``-wal`` yet when its first connection is
    made; the sidecars are then recorded at the first check that finds them
    (while the connection is open they cannot be deleted, so they are its own).
    """

    path: str
    database: tuple[int, int] | None
    wal: tuple[int, int] | None
    shm: tuple[int, int] | None
    owner: int | None = None
    """Who owns the database file: a replacement must be theirs or this user's."""

    @classmethod
    def at(cls, path: str) -> OpenedFiles:
        """Recorded right after the connection opened the database and its WAL."""
        try:
            info = os.stat(path)
        except FileNotFoundError:
            database, owner = None, None
        else:
            database, owner = (info.st_dev, info.st_ino), info.st_uid
        return cls(path, database, _identity(path + "-wal"), _identity(path + "-shm"), owner)

    def replaced(self) -> bool:
        """True when the path no longer names the database this connection holds."""
        try:
            info = os.stat(self.path)
        except FileNotFoundError:
            return True
        database = self.database
        if database is None or info.st_ino != database[1] or info.st_dev != database[0]:
            return True
        if self.wal is None or self.shm is None:
            self.wal = self.wal or _identity(self.path + "-wal")
            self.shm = self.shm or _identity(self.path + "-shm")
        return False

    def detach_sidecars(self) -> list[str]:
        """Unlink the old file's ``-wal``/``-shm`` if they are still at the path; which ones."""
        removed = []
        with _directory_lock(Path(self.path).parent):
            for suffix, opened in zip(SIDECARS, (self.wal, self.shm), strict=True):
                candidate = self.path + suffix
                if opened is not None and _identity(candidate) == opened:
                    os.unlink(candidate)
                    removed.append(candidate)
        return removed


@contextlib.contextmanager
def _directory_lock(directory: Path) -> Iterator[None]:
    """An exclusive ``flock`` on the directory: one process at a time detaches sidecars.

    On the directory, not the database: opening and closing a descriptor of
    the database would drop the POSIX locks SQLite holds on it.
    """
    if fcntl is None:
        yield
        return
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)
