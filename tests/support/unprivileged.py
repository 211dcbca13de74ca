"""Run a piece of a test as a user without root's powers, for read-only and foreign files.

Root ignores file permissions, so a test running as root cannot see what a
user sees when a file or folder is read-only. :func:`as_other_user` forks
(:mod:`tests.support.forked`), drops to ``nobody`` in the child (when running as
root; otherwise the child is already an ordinary user) and reports back what
the call returned or raised. The child only uses modules the parent imported: the interpreter's
own files may not be readable by ``nobody``.
"""

from __future__ import annotations

import os
import pwd
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .forked import run_forked

NOBODY = "nobody"


def other_user() -> tuple[int, int]:
    """(uid, gid) the child runs as: ``nobody`` under root, else this user."""
    if os.geteuid() != 0:
        return os.getuid(), os.getgid()
    entry = pwd.getpwnam(NOBODY)
    return entry.pw_uid, entry.pw_gid


def as_other_user(call: Callable[[], Any]) -> tuple[str, Any]:
    """``("ok", result)`` or ``("ExceptionClass", message)`` of ``call`` run as the other user."""
    return run_forked(call, in_child=_drop_root)  # type: ignore[no-any-return]


def _drop_root() -> None:
    if os.geteuid() == 0:
        uid, gid = other_user()
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)


@contextmanager
def shared_folder() -> Iterator[Path]:
    """A temporary folder the other user can reach (pytest's own are private to root)."""
    folder = Path(tempfile.mkdtemp(prefix="hermes-other-user-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        for inside in folder.rglob("*"):  # read-only folders would stop rmtree
            if inside.is_dir() and not inside.is_symlink():
                inside.chmod(0o755)
        shutil.rmtree(folder)


def give_to_other_user(*paths: Path) -> None:
    """Make ``paths`` the other user's (a no-op when that user is this one)."""
    uid, gid = other_user()
    for path in paths:
        os.chown(path, uid, gid)
