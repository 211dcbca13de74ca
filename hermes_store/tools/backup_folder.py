"""The folder backups go to: checked once, then held by a descriptor and never looked up again.

A backup is a full copy of someone's conversations. Written into a folder
another user can write, that user could swap the partial file for their own
between two steps that name it (a ``chmod``, SQLite's open), or plant a
symbolic link at the final name, and so be handed the copy. So, before
anything is written:

* the folder is opened (a ``--to`` that is a symbolic link is followed to its
  folder, which is what gets checked) and checked through that descriptor: it
  must belong to this user and be writable by nobody else (no group or other
  write bit, sticky or not). Anything else is refused with
  :class:`UnsafeBackupFolderError`, naming the folder, its owner, its mode
  and the way out. In a folder only this user can write, no other user can
  create, rename or delete a name, so no name inside can be swapped;
* every step of ours then goes through the descriptor (``dir_fd``): the
  partial is created ``O_EXCL | O_NOFOLLOW``, set 0600 and flushed with
  ``fchmod``/``fsync`` on its own descriptor, put in place with ``link``
  (which never replaces an existing name, a symbolic link included) and the
  partial name unlinked;
* SQLite, which only opens files by name, is given the name through the held
  descriptor (``/proc/self/fd/N/NAME`` on Linux), and before the copy is put
  in place the name is checked to still be the file created here. A parent
  folder another user can write could move our folder aside in between; that
  is detected (the copy is not kept), not prevented -- keep backups under a
  home folder, as ``$HERMES_HOME/backups`` is.

Concurrent backups into one folder put their copy in place and rotate under
an exclusive ``flock`` of the folder, one at a time.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import pwd
import stat
from collections.abc import Iterator
from pathlib import Path

from hermes_store.backends.sqlite.private_files import (
    PRIVATE_MODE,
    make_private_folders,
)
from hermes_store.errors import StoreError


class BackupError(StoreError):
    """The backup could not be made or did not verify; existing backups are untouched."""


class UnsafeBackupFolderError(BackupError):
    """The backup folder belongs to another user or others may write into it."""


def _owner(uid: int) -> str:
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def _unsafe(directory: Path, info: os.stat_result) -> UnsafeBackupFolderError:
    real = os.path.realpath(directory)
    linked = os.path.abspath(directory) != real  # a relative path is not a link
    where = f"{directory} (a symbolic link to {real})" if linked else real
    mode = stat.S_IMODE(info.st_mode)
    return UnsafeBackupFolderError(
        f"refusing to write a backup into {where}: it is owned by {_owner(info.st_uid)} with "
        f"mode {mode:04o}, so another user could read or replace the backup; nothing was "
        "written. Back up into a folder of your own that only you can write "
        "(e.g. 'mkdir -m 700 ~/hermes-backups', or 'chmod go-w' a folder that is yours)"
    )


class BackupFolder:
    """A checked folder, held open; names inside are resolved against its descriptor."""

    def __init__(self, path: Path, descriptor: int) -> None:
        self.path = path
        self.descriptor = descriptor

    def create(self, name: str) -> int:
        """A new file ``name``, 0600 whatever the umask; its descriptor (read-write)."""
        flags = os.O_CREAT | os.O_EXCL | os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC
        created = os.open(name, flags, PRIVATE_MODE, dir_fd=self.descriptor)
        try:
            os.fchmod(created, PRIVATE_MODE)
        except BaseException:
            os.close(created)
            raise
        return created

    def by_name(self, name: str) -> str:
        """How SQLite (which opens by name) reaches ``name`` in this very folder."""
        through = f"/proc/self/fd/{self.descriptor}"
        if os.path.isdir(through):
            return f"{through}/{name}"
        return str(self.path / name)

    def holds(self, name: str, descriptor: int) -> bool:
        """True when ``name`` in this folder is still the file behind ``descriptor``."""
        mine = os.fstat(descriptor)
        try:
            here = os.stat(name, dir_fd=self.descriptor, follow_symlinks=False)
        except FileNotFoundError:
            return False
        return (here.st_dev, here.st_ino) == (mine.st_dev, mine.st_ino)

    def publish(self, partial: str, final: str) -> None:
        """Give ``partial`` the name ``final``, which must not exist (not even as a link)."""
        try:
            os.link(partial, final, src_dir_fd=self.descriptor, dst_dir_fd=self.descriptor)
        except OSError as error:
            if error.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP):
                raise
            # A file system without hard links: the folder is ours alone, so the name
            # checked absent here stays absent until the rename.
            if self.exists(final):
                raise FileExistsError(errno.EEXIST, "backup name taken", final) from error
            os.rename(partial, final, src_dir_fd=self.descriptor, dst_dir_fd=self.descriptor)
            return
        self.unlink(partial)

    def exists(self, name: str) -> bool:
        try:
            os.stat(name, dir_fd=self.descriptor, follow_symlinks=False)
        except FileNotFoundError:
            return False
        return True

    def names(self) -> list[str]:
        return os.listdir(self.descriptor)

    def unlink(self, name: str) -> bool:
        """Remove ``name``; False when it was already gone (another run removed it)."""
        try:
            os.unlink(name, dir_fd=self.descriptor)
        except FileNotFoundError:
            return False
        return True

    def sync(self) -> None:
        """Flush the folder, so a name put in place survives a crash."""
        os.fsync(self.descriptor)

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        """One backup at a time puts its copy in place and rotates (a ``flock`` of the folder)."""
        held = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=self.descriptor)
        try:
            fcntl.flock(held, fcntl.LOCK_EX)
            yield
        finally:
            os.close(held)  # drops the lock


@contextlib.contextmanager
def backup_folder(directory: Path) -> Iterator[BackupFolder]:
    """``directory`` (made 0700 with its missing parents), checked and held open."""
    if directory.exists() and not directory.is_dir():
        raise BackupError(f"{directory} is not a directory (--to names where backups go)")
    make_private_folders(directory)
    descriptor = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        info = os.fstat(descriptor)
        if info.st_uid != os.geteuid() or stat.S_IMODE(info.st_mode) & 0o022:
            raise _unsafe(directory, info)
        yield BackupFolder(directory, descriptor)
    finally:
        os.close(descriptor)
