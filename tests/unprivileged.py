"""Run a piece of a test as a user without root's powers, for read-only and foreign files.

Root ignores file permissions, so a test running as root cannot see what a
user sees when a file or folder is read-only. :func:`as_other_user` forks,
drops to ``nobody`` in the child (when running as root; otherwise the child
is already an ordinary user) and reports back what the call returned or
raised. The child only uses modules the parent imported: the interpreter's
own files may not be readable by ``nobody``.
"""

from __future__ import annotations

import os
import pickle
import pwd
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

NOBODY = "nobody"


def other_user() -> tuple[int, int]:
    """(uid, gid) the child runs as: ``nobody`` under root, else this user."""
    if os.geteuid() != 0:
        return os.getuid(), os.getgid()
    entry = pwd.getpwnam(NOBODY)
    return entry.pw_uid, entry.pw_gid


def as_other_user(call: Callable[[], Any]) -> tuple[str, Any]:
    """``("ok", result)`` or ``("ExceptionClass", message)`` of ``call`` run as the other user."""
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        try:
            os.close(reader)
            uid, gid = other_user()
            if os.geteuid() == 0:
                os.setgroups([])
                os.setgid(gid)
                os.setuid(uid)
            try:
                outcome: tuple[str, Any] = ("ok", call())
            except BaseException as error:
                outcome = (type(error).__name__, str(error))
            with os.fdopen(writer, "wb") as pipe:
                pickle.dump(outcome, pipe)
        finally:
            os._exit(0)
    os.close(writer)
    with os.fdopen(reader, "rb") as pipe:
        data = pipe.read()
    os.waitpid(pid, 0)
    return pickle.loads(data)


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
