"""state.db holds whole conversations: it and its sidecars are private to the owner.

SQLite creates ``-wal`` and ``-shm`` with the permissions of the database file,
so creating the main file 0600 ourselves (before SQLite does, with the
process umask) makes all three private. An existing file is tightened with
``chmod``, which touches no file descriptor and so drops nobody's POSIX locks.
A symlink planted at the path could redirect the conversations elsewhere, so
it is refused rather than followed.
"""

from __future__ import annotations

import os
import pwd
import stat
from pathlib import Path

from hermes_store.errors import StoreError

PRIVATE_MODE = 0o600
PRIVATE_FOLDER_MODE = 0o700
SIDECARS = ("-wal", "-shm", "-journal")


class UnsafeDatabasePathError(StoreError):
    """The database path is a symlink or not a regular file."""


def _refuse_unsafe(path: Path) -> int | None:
    """The permission bits of ``path`` (a regular file), None if it does not exist.

    Raises if it is anything but a regular file.
    """
    try:
        info = path.lstat()
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(info.st_mode):
        raise UnsafeDatabasePathError(f"refusing to open {path}: it is a symbolic link")
    if not stat.S_ISREG(info.st_mode):
        raise UnsafeDatabasePathError(f"refusing to open {path}: it is not a regular file")
    return stat.S_IMODE(info.st_mode)


def make_private_folders(folder: Path) -> None:
    """Create ``folder`` and its missing parents 0700 (``HERMES_HOME`` holds conversations).

    ``mkdir(mode=...)`` is filtered by the umask (and ``parents=True`` gives the
    parents the umask's mode), so each folder made here is set to 0700 right
    after; a folder that already existed is left as it is. Every folder this package
    makes goes through here (``backup``'s too), so none is looser than 0700 whatever
    the umask.
    """
    missing = []
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    for made in reversed(missing):
        try:
            made.mkdir(mode=PRIVATE_FOLDER_MODE)
        except FileExistsError:  # another process made it first: theirs to set
            continue
        os.chmod(made, PRIVATE_FOLDER_MODE)


def require_fit_replacement(path: Path, previous_owner: int | None) -> None:
    """The checks opening makes, for a file that replaced the store's at ``path``.

    Like an open, a symbolic link or anything but a regular file is refused.
    And it must belong to this user or to whoever owned the file the store
    opened: someone else who could rename a file of theirs over state.db
    (a folder left writable by others) would otherwise be handed every message
    written from then on. (Its mode is then tightened, as opening tightens.)
    """
    if _refuse_unsafe(path) is None:
        return  # nothing there: the caller says what a missing file means
    owner = path.lstat().st_uid
    if owner not in (os.geteuid(), previous_owner):
        raise UnsafeDatabasePathError(
            f"{path} was replaced by a file owned by {_user(owner)}, not by "
            f"{_user(previous_owner if previous_owner is not None else os.geteuid())} who owned "
            "the file this store opened"
        )


def _user(uid: int) -> str:
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def require_existing_database(path: Path) -> None:
    """For a read-only open: ``path`` must be a regular file already; nothing is created."""
    if _refuse_unsafe(path) is None:
        from hermes_store.errors import StoreNotFoundError

        raise StoreNotFoundError(
            f"no database at {path}: a read-only open never creates one "
            "(check the path, or run 'hermes-store upgrade' to create a store there)"
        )


def ensure_private_database(path: Path, *, tighten: bool = True) -> None:
    """Create ``path`` 0600 (and missing folders 0700) if missing, else (``tighten``) tighten
    it and its sidecars to 0600.

    A store opening a file passes ``tighten=False`` and calls
    :func:`tighten_private_database` once it knows the file is a session
    store: a foreign database is refused exactly as it was found.
    """
    mode = _refuse_unsafe(path)
    if mode is None:
        make_private_folders(path.parent)
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW, PRIVATE_MODE)
        except FileExistsError:  # another process created it first
            pass
        else:
            os.close(fd)  # ours, made 0600: nothing to tighten
            return
    else:
        _refuse_foreign_empty_file(path)
    if tighten:
        tighten_private_database(path)


def _refuse_foreign_empty_file(path: Path) -> None:
    """An empty file of another user's is not where a new store is made.

    In a folder others may write (``HERMES_HOME`` in ``/tmp``), someone can
    leave an empty ``state.db`` of theirs: the store written into it stays
    theirs, to read or change whenever they like. A store that already holds
    data is another matter (root reading a user's store is how it is meant).
    """
    info = path.lstat()
    if info.st_size == 0 and info.st_uid != os.geteuid():
        raise UnsafeDatabasePathError(
            f"refusing to create a store in {path}: it is an empty file owned by "
            f"{_user(info.st_uid)}, who could read and change every conversation written "
            "to it; remove it, or pick a folder only you can write"
        )


def tighten_private_database(path: Path) -> None:
    """Take group and other permissions off ``path`` and its sidecars (``chmod``, no fd)."""
    sidecars = [Path(f"{path}{suffix}") for suffix in SIDECARS]
    for candidate in (path, *sidecars):
        candidate_mode = _refuse_unsafe(candidate)
        if candidate_mode is not None and candidate_mode & 0o077:
            os.chmod(candidate, candidate_mode & PRIVATE_MODE)
