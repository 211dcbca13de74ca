"""Which files in a backup folder are this store's backups, and which the rotation removes.

A name is not enough: two empty files named ``state-2099…Z.db`` (a mistaken
``touch``, a tool that died) once counted as the two newest backups, and
``--keep 2`` deleted the good backups, the one just verified included. So a
file counts only when it is what :func:`~hermes_store.tools.backup.backup`
leaves: named ``<stem>-<UTC time>Z.db``, a regular file (not a link) of this
user, with a SQLite header in rollback-journal mode whose page size and page
count match the file's size (what a finished, verified copy has; an empty,
truncated or foreign file does not). A file that does not count is never
deleted: it is not ours to judge. The header check reads 100 bytes, so
rotation stays cheap with many backups.

The rotation never removes the backup its own run just made; of the others
it keeps the newest ``keep - 1``. Concurrent runs rotate one at a time (see
:meth:`~hermes_store.tools.backup_folder.BackupFolder.exclusive`), and a file
another run removed first is simply not counted as removed.
"""

from __future__ import annotations

import os
import re
import stat

from hermes_store.backends.sqlite.file_header import is_database_header, page_size
from hermes_store.tools.backup_folder import BackupFolder

NAME = re.compile(r"^(?P<stem>.+)-(?P<stamp>\d{8}T\d{6}\.\d{6})Z\.db$")
_READ_ONLY = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
"""A symbolic link is not followed, a FIFO planted under a backup's name does not block."""
_ROLLBACK = 1
"""The file format bytes (header offsets 18 and 19) of a database not in WAL mode."""


def looks_finished(header: bytes, length: int) -> bool:
    """True for the first 100 bytes of a complete single-file SQLite database of ``length``."""
    if not is_database_header(header):
        return False
    if header[18] != _ROLLBACK or header[19] != _ROLLBACK:
        return False
    size = page_size(header)
    if size < 512 or size & (size - 1):
        return False
    pages = int.from_bytes(header[28:32], "big")
    size_is_valid = header[24:28] == header[92:96]  # the change counter it was written at
    if size_is_valid and pages:
        return length == pages * size
    return length >= size and length % size == 0


def _is_finished_backup(folder: BackupFolder, name: str) -> bool:
    try:
        descriptor = os.open(
            name,
            os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
            dir_fd=folder.descriptor,
        )
    except OSError:  # gone, a symbolic link, unreadable: not one of ours
        return False
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
            return False
        return looks_finished(os.pread(descriptor, 100, 0), info.st_size)
    finally:
        os.close(descriptor)


def finished_backups(folder: BackupFolder, stem: str) -> list[str]:
    """The names of ``stem``'s finished backups in ``folder``, oldest first (names sort by time)."""
    found = []
    for name in folder.names():
        match = NAME.match(name)
        if match and match["stem"] == stem and _is_finished_backup(folder, name):
            found.append(name)
    return sorted(found)


def rotate(folder: BackupFolder, stem: str, keep: int, made: str) -> list[str]:
    """Remove the oldest finished backups so ``keep`` remain, ``made`` always among them."""
    others = [name for name in finished_backups(folder, stem) if name != made]
    doomed = others[: max(0, len(others) - (keep - 1))]
    return [name for name in doomed if folder.unlink(name)]
