"""Real separate processes for the contention tests of either backend."""

from __future__ import annotations

import subprocess
import sys

_OPEN_AND_WRITE = (
    "import sys; from hermes_store import SessionDB;"
    "db = SessionDB(sys.argv[1]); db.create_session('s' + sys.argv[2], 'cli');"
    "db.append_message('s' + sys.argv[2], 'user', 'hello'); db.close()"
)


def open_at_once(target: str, workers: int) -> None:
    """``workers`` processes open ``target`` (a path or URL) together and each writes a session.

    On a brand-new database they race on creating the schema; every one must succeed.
    """
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _OPEN_AND_WRITE, target, str(n)],
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(workers)
    ]
    for proc in procs:
        _out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err


def probe_output(code: str, timeout: float = 120) -> str:
    """Run ``code`` in a fresh interpreter (nothing imported yet); its stdout, stripped.

    For what only a new process shows: which modules an import loads, what
    an open writes. A failing probe fails the test with its traceback.
    """
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=timeout
    )
    return done.stdout.strip()
