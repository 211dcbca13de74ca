"""A full disk, for real: a file size limit in a separate process (support/full_disk_worker.py).

What runs after a commit must never turn it into an error -- a caller that
retries a write it was told had failed stores it twice -- and a write that
could not land says so in the store's own words, naming the file.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support import refused_creates
from tests.support.paths import REPO, SUPPORT

pytestmark = pytest.mark.sqlite_only("a SQLite file on a file system without space")

WORKER = SUPPORT / "full_disk_worker.py"


def run_worker(scenario: str, path: Path, *, on_small_disk: bool = False) -> dict[str, Any]:
    """Run the worker; ``on_small_disk``: in a mount namespace, with a 4 MB tmpfs at the folder."""
    command = [sys.executable, str(WORKER), scenario, str(path)]
    if on_small_disk:
        mount = f"mount -t tmpfs -o size=4m tmpfs {shlex.quote(str(path.parent))}"
        command = ["unshare", "-rm", "sh", "-c", f'{mount} && exec "$0" "$@"', *command]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def small_disks() -> bool:
    """Whether this machine lets a process mount a tmpfs of its own (a user namespace)."""
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=1m tmpfs /mnt"],
        capture_output=True,
    )
    return probe.returncode == 0


def test_a_failed_checkpoint_never_fails_the_write_that_committed(db_path: Path) -> None:
    report = run_worker("checkpoint", db_path)
    # Commit 5 of the store ran the checkpoint, which could not grow the file.
    assert report["outcomes"] == ["ok"] * 7
    assert report["stored"] == 7, "every append that returned is in the file, once"
    assert report["warnings"], "a failed checkpoint is logged"
    assert all("checkpoint" in w and str(db_path) in w for w in report["warnings"])
    # The failed checkpoint is retried at the next commit, not 5 commits later:
    # once the disk has room, the append right after it moves the WAL's pages in.
    assert report["size_after_last"] > report["size_before_last"] + 4096


_SPENT_QUOTA_CHILD = """
import errno, sys
from refused_creates import refuse_creates
from hermes_store import Store, StoreError
refuse_creates(errno.EDQUOT)
try:
    Store(sys.argv[1])
    print("opened")
except StoreError as error:
    print(type(error).__name__, "|", error)
"""


@pytest.mark.skipif(not refused_creates.supported(), reason="seccomp filter for x86_64/aarch64")
def test_a_spent_disk_quota_is_named_a_full_disk(tmp_path: Path) -> None:
    """``EDQUOT`` from the kernel, creating the file, is a full disk as ``ENOSPC`` is.

    The kernel refuses the child's file creation with ``EDQUOT`` (a seccomp
    filter, see tests/support/refused_creates.py: no file system here has quotas a
    test can set); the store's own ``os.open`` meets it.
    """
    path = tmp_path / "state.db"
    environment = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{SUPPORT}"}
    done = subprocess.run(
        [sys.executable, "-c", _SPENT_QUOTA_CHILD, str(path)],
        capture_output=True,
        text=True,
        env=environment,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    kind, _, message = done.stdout.strip().splitlines()[-1].partition(" | ")
    assert kind == "StoreFullError", done.stdout
    assert str(path) in message and "quota" in message.lower()
    assert not path.exists()
