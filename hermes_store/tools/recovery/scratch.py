"""Scratch folders beside a file that a killed run cannot leave behind for good.

``recover`` copies the whole damaged file (and builds the new one) in a
scratch folder; ``check`` snapshots a damaged file into one. A ``finally``
removes the folder on every exit Python sees, but not on SIGKILL, an OOM
kill or a power cut, and a left-behind folder holds a full copy of
someone's sessions. An unlinked file (``O_TMPFILE``) would vanish with the
process, but SQLite must open the copy by name to apply its ``-wal``, so the
folder has a name; instead, each run holds an exclusive ``flock`` on its
folder for as long as it lives (the kernel drops it when the process dies,
however it dies), and every run first sweeps the folders of its kind that no
live process holds. So what a killed run leaves is removed by the next run
of either command in that folder.

The sweep only touches real folders (not symbolic links) named with the
prefix and owned by this user: another user's scratch in a shared folder is
theirs to clean.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def scratch_folder(parent: Path, prefix: str) -> Iterator[Path]:
    """A new folder ``parent/prefix*``, locked while in use, removed on the way out."""
    sweep(parent, prefix)
    path, handle = _locked_folder(parent, prefix)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
        os.close(handle)


def _locked_folder(parent: Path, prefix: str) -> tuple[Path, int]:
    """A fresh folder with its lock held.

    Between ``mkdtemp`` and the lock another run's sweep may take the new,
    unlocked folder for a stale one; the blocking lock then waits for that
    sweep to finish, and a folder that is gone (or no longer the one made) is
    made again.
    """
    while True:
        path = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
        handle = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            same = os.stat(path, follow_symlinks=False).st_ino == os.fstat(handle).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return path, handle
        os.close(handle)


def sweep(parent: Path, prefix: str) -> int:
    """Remove this user's ``prefix*`` folders in ``parent`` that no live run holds; how many."""
    removed = 0
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return 0
    for entry in entries:
        if not entry.name.startswith(prefix):
            continue
        try:
            if not entry.is_dir(follow_symlinks=False):
                continue
            if entry.stat(follow_symlinks=False).st_uid != os.geteuid():
                continue
            handle = os.open(entry.path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(handle)
            continue  # a live run holds it
        try:
            shutil.rmtree(entry.path, ignore_errors=True)
            removed += 1
        finally:
            os.close(handle)
    return removed
